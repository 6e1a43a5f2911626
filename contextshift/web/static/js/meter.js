// The composer's context meter: how much of the budget the next prompt uses, and how much history it leaves
// out or summarizes (the same counts as the prompt view: marks.js).

import { badge, h, num, replace } from "./dom.js";
import { promptCounts } from "./marks.js";

/** The meter's badge for an approximate count: "≈ calibrated" once the provider's usage corrects it (T5). */
function approxBadge(p) {
  const c = p.calibration;
  if (c && c.applied && c.calls > 0) {
    return badge("≈ calibrated", "ok", { title: `${c.label}; margin ${(c.margin * 100).toFixed(1)}%`, dataset: { factor: c.factor } });
  }
  return badge("≈ approximate", "warn", { title: `Tokenizer ${p.tokenizer.profile} is an estimate (not calibrated yet)` });
}

/** The meter. onOpen: shows the next prompt. Returns {el, render(preview, error, {command})}. */
export function contextMeter({ onOpen }) {
  const fill = h("div.bar-fill");
  const bar = h("div.bar.low#context-meter", { role: "meter", "aria-label": "Context used by the next prompt", "aria-valuemin": 0 }, fill);
  const text = h("span.meter-text", "…");
  const facts = h("span.meter-facts");
  const el = h(
    "div.meter-box",
    { "aria-live": "off" },
    h("div.bar-wrap", bar),
    h("div.meter-line", text, facts, h("button.link.small", { type: "button", onclick: onOpen }, "Next prompt")),
  );

  function render(p, error, { command = false } = {}) {
    if (error) {
      bar.className = "bar high";
      fill.style.width = "100%";
      if (error.code === "TOKEN_BUDGET_EXCEEDED") {
        const params = error.params || {};
        text.textContent = `Over budget: ${num(params.prompt_tokens)} protected tokens, budget ${num(params.budget ?? params.context_limit - params.response_reserve)}`;
      } else text.textContent = `Preview unavailable: ${error.message}`;
      facts.textContent = "";
      return;
    }
    if (!p) return;
    // The service gives the budget once (window − reserve): the status panel and /status read the same figure.
    const budget = p.budget.budget ?? p.budget.context_limit - p.budget.response_reserve;
    const used = p.budget.prompt_tokens;
    const ratio = budget > 0 ? Math.min(1, used / budget) : 1;
    bar.className = `bar ${ratio >= 0.95 ? "high" : ratio >= 0.8 ? "mid" : "low"}`;
    fill.style.width = `${(ratio * 100).toFixed(1)}%`;
    bar.setAttribute("aria-valuemax", String(Math.max(budget, 0)));
    bar.setAttribute("aria-valuenow", String(used));
    const counts = promptCounts(p);
    const approx = p.tokenizer.approximate;
    bar.setAttribute("aria-valuetext", `${num(used)} of ${num(budget)} tokens${approx ? " (approximate)" : ""}, ${counts.leftOut} left out, ${counts.summarized} summarized`);
    // The budget is the window less what is reserved for the reply: say so, so it is not read as the window.
    text.title = `Budget ${num(budget)} = context window ${num(p.budget.context_limit)} − ${num(p.budget.response_reserve)} reserved for the reply`;
    replace(text, h("strong.meter-used", num(used)), " / ", h("span.meter-budget", num(budget)), " tokens", " ", approx ? approxBadge(p) : badge(p.tokenizer.profile, "ok", { title: "Exact tokenizer" }));
    replace(
      facts,
      h("span.meter-excluded", { dataset: { count: counts.leftOut } }, `${counts.leftOut} left out`),
      " · ",
      h("span.meter-summarized", { dataset: { count: counts.summarized } }, `${counts.summarized} summarized`),
      command ? [" · ", h("span.muted", "command: answered by contextshift")] : null,
    );
  }

  return { el, render };
}
