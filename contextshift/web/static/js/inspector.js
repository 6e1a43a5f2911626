// The chat's side panel: the session status panel (C14, C6) and the prompt view of the last audit (A2, A4)
// or of the next prompt (the live preview, A5).

import { ApiError, optional, post } from "./api.js";
import { badge, checkbox, duration, h, num, pct, replace, shorten, when } from "./dom.js";
import { compactionWords, errorWords, REASON_WORDS, rejectionWords, STATUS, statusTone, TRIGGER_WORDS } from "./words.js";
import { promptCounts, subtotals } from "./marks.js";

// -- session status --------------------------------------------------------------------------------------

function bar(value, max, label, { estimate = false } = {}) {
  const ratio = max ? Math.min(1, value / max) : 0;
  const level = ratio >= 0.9 ? "high" : ratio >= 0.75 ? "mid" : "low";
  return h(
    "div.bar-wrap",
    h(
      `div.bar.${level}`,
      {
        role: "meter",
        "aria-label": label,
        "aria-valuemin": 0,
        "aria-valuemax": max || 0,
        "aria-valuenow": value || 0,
        "aria-valuetext": max ? `${num(value)} of ${num(max)} tokens${estimate ? " (estimate)" : ""}` : `${num(value)} tokens`,
      },
      h("div.bar-fill", { style: `width: ${(ratio * 100).toFixed(1)}%` }),
    ),
  );
}

export function compactionLogItem(log, { compact = false } = {}) {
  const kind = statusTone(log.status);
  const usage =
    log.input_tokens != null || log.output_tokens != null
      ? `${num(log.input_tokens)} in / ${num(log.output_tokens)} out`
      : "—";
  const summary = log.summary
    ? h(
        "details.summary-text",
        h("summary", h("span.when-closed", shorten(log.summary, compact ? 90 : 160)), h("span.when-open", "Summary")),
        h("p.pre", log.summary),
      )
    : h("p.muted", log.status === STATUS.SKIPPED ? "Nothing to compact." : "No summary.");
  return h(
    "div.log-item",
    { dataset: { logId: log.id, status: log.status } },
    h(
      "div.log-head",
      badge(log.status, kind),
      " ",
      h("span", TRIGGER_WORDS[log.trigger] || log.trigger || ""),
      " · ",
      h("time", { datetime: log.started_at }, when(log.started_at)),
    ),
    h(
      "dl.facts",
      h("dt", "Messages"),
      h("dd", num(log.message_count)),
      h("dt", "Duration"),
      h("dd", duration(log.started_at, log.completed_at)),
      h("dt", "Model"),
      h("dd", log.model || "—"),
      h("dt", "Usage"),
      h("dd", usage),
      log.error_code ? [h("dt", "Error"), h("dd", h("code", log.error_code), " ", errorWords(log.error_code, ""))] : null,
    ),
    summary,
  );
}

/** The status panel of a chat. ctx: {chat, refreshAll(), panel}. */
export async function renderStatus(panel, ctx) {
  const body = panel.querySelector(".status-body") || panel.appendChild(h("div.status-body"));
  let data;
  try {
    data = await optional(`/chats/${ctx.chat.id}/status`);
  } catch (error) {
    replace(body, h("p.error-text", { role: "alert" }, error.message));
    return;
  }
  // The outcome of "Compact now" outlives the refresh that the compaction itself causes.
  const result = body.querySelector(".compact-result") || h("div.compact-result", { "aria-live": "polite" });
  const compactButton = h(
    "button.primary",
    {
      type: "button",
      id: "compact-now",
      onclick: async () => {
        compactButton.disabled = true;
        compactButton.textContent = "Compacting…";
        replace(result, h("p.muted", "Folding old history into a summary…"));
        try {
          const answer = await post(`/chats/${ctx.chat.id}/compact`, {});
          const words =
            answer.status === STATUS.COMPLETED
              ? `Compacted ${num(answer.message_count)} messages into a summary.`
              : answer.status === STATUS.SKIPPED
                ? "Nothing to compact: the history is already short."
                : `Compaction failed${answer.error_code ? `: ${errorWords(answer.error_code, answer.error_code)}` : ""}${answer.reason ? `: ${rejectionWords(answer.reason)}.` : "."}`;
          replace(result, h(`p.${answer.status === STATUS.FAILED ? "error-text" : "ok-text"}`, { role: "status" }, words));
          await ctx.refreshAll();
        } catch (error) {
          let words = error.message;
          if (error instanceof ApiError && error.missing) words = "This server has no compaction endpoint yet.";
          else if (error instanceof ApiError && error.code === "compaction.model_unavailable")
            words = `Compaction cannot run: ${compactionWords(error.params?.reason)}`;
          replace(result, h("p.error-text", { role: "alert" }, words));
        } finally {
          compactButton.disabled = false;
          compactButton.textContent = "Compact now";
        }
      },
    },
    "Compact now",
  );
  const actions = h("div.actions", compactButton, h("button", { type: "button", onclick: () => renderStatus(panel, ctx) }, "Refresh"));
  if (!data) {
    replace(
      body,
      h(
        "p.notice",
        "Session status is not available on this server yet (no /status endpoint). The prompt view and the context meter still work.",
      ),
      actions,
      result,
    );
    return;
  }
  const status = data.status || {};
  const context = status.context || {};
  const cache = status.prompt_cache || {};
  const tools = status.tools_used || [];
  const auto = status.automatic || {};
  const last = status.last_compaction;
  const percent = context.percent;
  // The figure the context meter shows: the next prompt against the budget it is fitted to (window − reserve).
  const budget = context.budget ?? context.window;
  replace(
    body,
    h(
      "section.status-block",
      { "aria-labelledby": "status-context-h" },
      h("h3#status-context-h", "Context"),
      bar(context.tokens || 0, budget || 0, "Context used against the prompt's budget", {
        estimate: context.estimated,
      }),
      h(
        "p.status-line.context-line",
        h("strong.status-used", num(context.tokens)),
        budget ? [" of ", h("span.status-budget", num(budget)), " tokens"] : " tokens",
        percent != null ? [" · ", h("strong", pct(percent, percent < 10 ? 1 : 0))] : null,
        context.estimated ? [" ", badge("estimate", "warn", { title: "Counted with an approximate tokenizer" })] : null,
      ),
      h(
        "p.muted.small.window-line",
        context.window
          ? `Budget = context window ${num(context.window)} − ${num(context.response_reserve)} reserved for the reply.`
          : `The model declares no window: the budget assumes one, less ${num(context.response_reserve)} reserved for the reply.`,
      ),
      calibrationLine(context.calibration),
    ),
    h(
      "section.status-block",
      h("h3", "Prompt cache"),
      h(
        "p.status-line",
        cache.hit_rate != null
          ? [h("strong", pct(cache.hit_rate * 100)), " hit rate · ", num(cache.cached_tokens), " of ", num(cache.input_tokens), " input tokens cached"]
          : "No provider usage reported yet.",
      ),
    ),
    h(
      "section.status-block",
      h("h3", "Tools used"),
      tools.length
        ? h("ul.inline-list", tools.map((t) => h("li", h("code", t.name), ` × ${num(t.count)}`)))
        : h("p.muted", "None in this session."),
    ),
    h(
      "section.status-block",
      h("h3", "Automatic compaction"),
      auto.active
        ? h("p.status-line", badge("on", "ok"), " Runs when raw history reaches half of the window.")
        : h("p.status-line", badge("off", "warn"), " ", compactionWords(auto.reason) || "Not active."),
    ),
    h(
      "section.status-block",
      h("h3", "Last compaction"),
      last ? compactionLogItem(last, { compact: true }) : h("p.muted", "None yet."),
    ),
    actions,
    result,
  );
}

// -- prompt view -----------------------------------------------------------------------------------------

/** Tokens per category of what was sent (system, lorebook, memory, history, summary, input). */
function subtotalTable(data) {
  const { rows, framing, total } = subtotals(data);
  return h(
    "table.subtotals",
    h("caption", "Tokens sent, by category"),
    h("thead", h("tr", h("th", { scope: "col" }, "Category"), h("th", { scope: "col" }, "Tokens"))),
    h(
      "tbody",
      rows.map((r) => h("tr", { dataset: { category: r.id } }, h("th", { scope: "row" }, r.label), h("td", num(r.tokens)))),
      h("tr", { dataset: { category: "framing" } }, h("th", { scope: "row" }, "Chat format"), h("td", num(framing))),
    ),
    h("tfoot", h("tr", h("th", { scope: "row" }, "Prompt"), h("td", num(total)))),
  );
}

function entryItem(entry, ctx) {
  const reasonWords = REASON_WORDS[entry.reason] || entry.reason;
  const message = ctx.messageById?.(entry.identifier);
  const standsFor = entry.stands_for || [];
  return h(
    `li.entry.${entry.included ? "in" : "out"}`,
    { dataset: { identifier: entry.identifier, reason: entry.reason, source: entry.source } },
    h(
      "div.entry-head",
      h("span.entry-order", `#${entry.order + 1}`),
      badge(entry.source, `src-${entry.source}`),
      h("span.entry-role", entry.role),
      h("span.entry-tokens", `${num(entry.tokens)} tok`),
      h(
        `span.badge.entry-reason.${entry.included ? "ok" : entry.reason === "summarized" ? "sum" : "bad"}`,
        { title: reasonWords },
        `${entry.included ? "sent" : "left out"}: ${entry.reason}`,
      ),
      message
        ? h(
            "button.link.small.show-in-chat",
            { type: "button", "aria-label": `Show message ${message.position} in the chat`, onclick: () => ctx.focusMessage(entry.identifier) },
            "show",
          )
        : null,
    ),
    h(
      "details.entry-content",
      h("summary", shorten(entry.content, 200) || h("em", "(empty)")),
      h("p.pre", entry.content),
      h("p.muted.small", `Reason: ${reasonWords}.`, entry.relevance != null ? ` Relevance ${entry.relevance.toFixed(2)}.` : ""),
    ),
    standsFor.length
      ? h(
          "div.stands-for",
          `Stands for ${standsFor.length} message${standsFor.length === 1 ? "" : "s"}: `,
          h(
            "ul.inline-list",
            standsFor.slice(0, 60).map((id) =>
              h(
                "li",
                ctx.messageById?.(id)
                  ? h("button.link", { type: "button", onclick: () => ctx.focusMessage(id) }, `#${ctx.messageById(id).position}`)
                  : h("code", id.slice(0, 8)),
              ),
            ),
            standsFor.length > 60 ? h("li", `… ${standsFor.length - 60} more`) : null,
          ),
        )
      : null,
  );
}

let onlyLeftOut = false;

/** The history older than the loaded window: one line for all of it (the prompt never read it). */
function notLoadedItem(count) {
  return h(
    "li.entry.out.not-loaded",
    { dataset: { reason: "context-shift" } },
    h(
      "div.entry-head",
      badge("history", "src-history"),
      h("span.badge.entry-reason.bad", { title: REASON_WORDS["context-shift"] }, "left out: context-shift"),
    ),
    h("p.muted.small", `${num(count)} older message${count === 1 ? "" : "s"}, before the newest history that could fit: not read, not sent.`),
  );
}

function entryList(entries, ctx, notLoaded) {
  const list = h("ol.entries", { "aria-label": "Prompt blocks in order" });
  const fill = () => {
    list.replaceChildren(
      ...(notLoaded ? [notLoadedItem(notLoaded)] : []),
      ...entries.filter((e) => !onlyLeftOut || !e.included).map((e) => entryItem(e, ctx)),
    );
  };
  const toggle = checkbox("Only blocks left out", {
    checked: onlyLeftOut,
    onchange: (event) => {
      onlyLeftOut = event.target.checked;
      fill();
    },
  });
  fill();
  return h("div.entry-list", toggle.row, list);
}

/** The prompt view. data: an audit or a preview; kind "audit" | "preview". */
export function promptView(data, kind, ctx) {
  if (!data) {
    return h(
      "p.notice",
      kind === "audit"
        ? "No generation yet in this chat: there is no last prompt to show. Switch to “Next prompt” to see what would be sent."
        : "The preview is not loaded yet.",
    );
  }
  const budget = data.budget || {};
  const available = budget.budget ?? (budget.context_limit || 0) - (budget.response_reserve || 0);
  const entries = data.entries || [];
  const counts = promptCounts(data);
  const tokenizer = data.tokenizer || {};
  const failed = kind === "audit" && data.status === STATUS.FAILED;
  return h(
    "div.prompt-view",
    { dataset: { kind } },
    h(
      "div.prompt-meta",
      kind === "audit"
        ? h(
            "p",
            badge(data.status, statusTone(data.status, "warn")),
            " ",
            h("time", { datetime: data.created_at }, when(data.created_at)),
            data.model ? [" · ", h("code", data.model)] : null,
            data.provider_kind ? ` (${data.provider_kind})` : "",
          )
        : h("p", badge("preview", "info"), " What the next prompt would hold with the text in the composer. Nothing is stored."),
      data.error_code
        ? h(
            `div.error-box${failed ? "" : ".soft"}`,
            { role: failed ? "alert" : null },
            h("strong", data.error_code),
            h("p", errorWords(data.error_code, "")),
          )
        : null,
      h(
        "p.budget-line",
        { "aria-label": "Budget" },
        "Context limit ",
        h("strong", num(budget.context_limit)),
        " − reserve ",
        h("strong", num(budget.response_reserve)),
        " = budget ",
        h("strong", num(available)),
        " · prompt ",
        h("strong.prompt-tokens", num(budget.prompt_tokens)),
        " tokens",
      ),
      h(
        "p.tokenizer-line",
        "Tokenizer ",
        // The profile "approximate" is named once: by the badge, or by the calibration label that starts with it.
        tokenizer.profile === "approximate" ? null : [h("code", tokenizer.profile || "?"), " "],
        data.calibration && data.calibration.calls
          ? h("span.calibration-label", data.calibration.label)
          : tokenizer.approximate
            ? badge("approximate", "warn")
            : badge("exact", "ok"),
        " · strategy ",
        h("code", data.context_strategy || "?"),
      ),
      (data.attempts || []).length
        ? h(
            "p.attempts-line",
            "Attempts: ",
            data.attempts.map((a, i) => [i ? " → " : "", badge(a.outcome, a.outcome === STATUS.COMPLETED ? "ok" : "warn", { title: a.reported_tokens ? `provider counted ${num(a.reported_tokens)} tokens` : "" })]),
          )
        : null,
      data.usage
        ? h(
            "p.muted",
            `Provider usage: ${num(data.usage.input_tokens)} in (${num(data.usage.cached_input_tokens)} cached) / ${num(data.usage.output_tokens)} out`,
          )
        : null,
      h(
        "p.counts",
        `${counts.sent} sent, ${counts.leftOut} left out, ${counts.summarized} summarized`,
        counts.notLoaded ? ` (${num(counts.notLoaded)} of those left out are older history, not read)` : "",
        counts.skipped ? `, ${counts.skipped} empty or inactive` : "",
      ),
      entries.length ? subtotalTable(data) : null,
    ),
    entries.length || counts.notLoaded ? entryList(entries, ctx, counts.notLoaded) : h("p.muted", "No blocks were recorded."),
    data.diagnostics?.length
      ? h("details.diagnostics", { open: failed }, h("summary", `Diagnostics (${data.diagnostics.length})`), h("ul", data.diagnostics.map((d) => h("li", d))))
      : null,
    h(
      "details.provider-messages",
      h("summary", `Provider messages (${(data.provider_messages || []).length})`),
      h("pre.json", { tabindex: "0", "aria-label": "The messages as sent" }, JSON.stringify(data.provider_messages || [], null, 2)),
    ),
  );
}

/** T5: how the provider's usage corrects this model's counts (the factor), or that it has not yet. */
function calibrationLine(c) {
  if (!c) return null;
  const kind = c.drift ? "bad" : c.applied && c.calls ? "ok" : "muted";
  const words = c.drift ? `${c.label} — the model's tokenizer setting looks wrong` : c.label;
  return h("p.status-line.calibration", { dataset: { factor: c.factor, calls: c.calls } }, "Token counts: ", badge(c.applied && c.calls ? `×${c.factor.toFixed(2)}` : c.drift ? "drift" : "—", kind), " ", words);
}
