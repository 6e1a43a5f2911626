// Provider forms' helpers: "Test connection" and the provider's own model list (choices that prefill the window).
// Each is a small component with its own state: a button and a live status line.

import { get, post } from "./api.js";
import { badge, h, num, replace, select } from "./dom.js";
import { errorWords } from "./words.js";

/** The answer of a test (`{ok, code, message, status, models}`) in words; a failure says its cause. */
function testOutcome(test) {
  if (test.ok) return [badge("connected", "ok"), ` The provider answered${test.models === null ? "" : ` and lists ${num(test.models)} model${test.models === 1 ? "" : "s"}`}.`];
  return [badge("failed", "bad"), " ", h("code", test.code), " ", errorWords(test.code, test.message), test.status ? ` (HTTP ${test.status})` : ""];
}

/**
 * A "Test connection" button and its result. `request()` gives [path, body] at click time: a saved provider's
 * `/providers/{id}/test`, or `/provider-tests` with the form's values (when `valid()` says they can be sent).
 */
export function connectionTest(request, { valid = () => true } = {}) {
  const result = h("p.provider-test", { role: "status", "aria-live": "polite" });
  const button = h("button.small", { type: "button" }, "Test connection");
  button.addEventListener("click", async () => {
    if (!valid()) return;
    button.disabled = true;
    replace(result, "Testing…");
    try {
      const [path, body] = request();
      const { test } = await post(path, body);
      replace(result, ...testOutcome(test));
      result.dataset.outcome = test.ok ? "ok" : test.code;
    } catch (error) {
      replace(result, badge("failed", "bad"), " ", errorWords(error.code, error.message));
      result.dataset.outcome = error.code || "error";
    } finally {
      button.disabled = false;
    }
  });
  return { button, result, row: h("div.provider-test-row", button, result) };
}

/**
 * "Fetch models": the provider's own list as choices; choosing one fills the name and, where the provider
 * states them or the model is well known, the context window and max output. `providerId` is an id, or a
 * function giving the one a form's provider select has at click time.
 */
export function modelPicker(providerId, { name, windowInput, maxOut }) {
  const status = h("p.help.model-list-status", { role: "status", "aria-live": "polite" });
  const choices = select([["", "Fetch the list first"]], "", { name: "listed_model", disabled: true, "aria-label": "The provider's models" });
  let listed = [];
  choices.addEventListener("change", () => {
    const chosen = listed.find((m) => m.id === choices.value);
    if (!chosen) return;
    name.value = chosen.id;
    windowInput.value = chosen.context_window ?? "";
    maxOut.value = chosen.max_output_tokens ?? "";
    replace(status, chosen.context_window ? `Window ${num(chosen.context_window)} tokens${chosen.max_output_tokens ? `, max output ${num(chosen.max_output_tokens)}` : ""}: check them before saving.` : "The provider does not say this model's window: enter it yourself.");
  });
  const button = h("button.small", { type: "button" }, "Fetch models");
  button.addEventListener("click", async () => {
    button.disabled = true;
    replace(status, "Asking the provider…");
    try {
      const id = typeof providerId === "function" ? providerId() : providerId;
      ({ models: listed } = await get(`/providers/${id}/models`));
      replace(choices, h("option", { value: "" }, listed.length ? `Choose one of ${num(listed.length)}` : "The provider lists no models"));
      for (const m of listed) choices.append(h("option", { value: m.id }, `${m.id}${m.context_window ? ` (${num(m.context_window)} window)` : ""}`));
      choices.disabled = !listed.length;
      replace(status, `${num(listed.length)} model${listed.length === 1 ? "" : "s"} listed.`);
      if (listed.length) choices.focus();
    } catch (error) {
      replace(status, badge("failed", "bad"), " ", h("code", error.code || "error"), " ", errorWords(error.code, error.message));
    } finally {
      button.disabled = false;
    }
  });
  return { row: h("div.field.model-picker", h("span.label", "From the provider"), h("div.model-picker-controls", button, choices), status) };
}
