// The compatible endpoint (/v1: OpenAI's chat completions and Anthropic's messages): the caller's recent calls, and the audit of one (what was kept or left out).

import { get, optional } from "./api.js";
import { badge, h, num, replace, when } from "./dom.js";
import { promptView } from "./inspector.js";
import { statusTone } from "./words.js";

function snippet(label, text) {
  return h(
    "pre.snippet",
    { tabindex: "0", "aria-label": label }, // it scrolls sideways on a phone: keyboard users reach it too
    h("code", text),
  );
}

function snippets() {
  const origin = location.origin;
  return [
    h("p", "Point an existing app at ", h("code", `${origin}/v1`), " with a contextshift token as its API key. The ", h("code", "openai"), " SDK:"),
    snippet(
      "Example code for the openai SDK",
      `from openai import OpenAI\n\nclient = OpenAI(base_url="${origin}/v1", api_key="cs_…")  # a contextshift token\n` +
        `reply = client.chat.completions.create(model="<a chat model>", messages=history)`,
    ),
    h("p", "The ", h("code", "anthropic"), " SDK (", h("code", "POST /v1/messages"), "):"),
    snippet(
      "Example code for the anthropic SDK",
      `from anthropic import Anthropic\n\nclient = Anthropic(base_url="${origin}", api_key="cs_…")  # a contextshift token\n` +
        `reply = client.messages.create(model="<a chat model>", max_tokens=1024, messages=history)`,
    ),
    h("p.muted", "Each reply's x-contextshift-excluded header counts the messages left out to fit the model's window; its x-contextshift-audit header names the call below."),
  ];
}

function auditRow(audit) {
  const tone = statusTone(audit.status, "warn");
  return h(
    "li.card",
    h("a.card-title", { href: `#/endpoint/${audit.id}` }, h("code", audit.model)),
    h(
      "p",
      badge(audit.status, tone),
      audit.error_code ? [" ", h("code", audit.error_code)] : null,
      " ",
      h("time", { datetime: audit.created_at }, when(audit.created_at)),
    ),
    h(
      "p.muted",
      audit.excluded_count ? `${num(audit.excluded_count)} message(s) left out` : "nothing left out",
      audit.prompt_tokens != null ? ` · ${num(audit.prompt_tokens)} of ${num(audit.context_limit)} tokens` : "",
    ),
  );
}

/** #/endpoint: recent calls of the signed-in user; #/endpoint/<id>: one call's audit. */
export async function endpointView(main, [auditId]) {
  document.title = "Endpoint · contextshift";
  if (auditId) {
    const answer = await get(`/proxy-audits/${encodeURIComponent(auditId)}`);
    replace(
      main,
      h(
        "section.page",
        h("p", h("a", { href: "#/endpoint" }, "← Endpoint calls")),
        h("h1", "Endpoint call"),
        promptView(answer.audit, "audit", {}),
      ),
    );
    return null;
  }
  const answer = await optional("/proxy-audits?limit=50");
  const audits = answer ? answer.audits : [];
  replace(
    main,
    h(
      "section.page",
      h("h1", "OpenAI- and Anthropic-compatible endpoint"),
      ...snippets(),
      h("h2", "Recent calls"),
      audits.length
        ? h("ul.card-list.providers", audits.map(auditRow))
        : h("p.muted", "No calls yet (audits are kept for a day)."),
    ),
  );
  return null;
}
