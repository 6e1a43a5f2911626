// The API's validation errors (422 VALIDATION) shown next to the field they are about, in plain words.
// Used by the memories and lorebook editors.

import { h } from "./dom.js";

const numberFormat = new Intl.NumberFormat("en");
const bound = (msg) => {
  const found = String(msg || "").match(/(-?\d[\d_]*)(?!.*\d)/);
  return found ? numberFormat.format(Number(found[1].replace(/_/g, ""))) : null;
};

/** One problem of the API's `params.errors` (pydantic's {loc, msg, type}) in plain words; value: what was sent. */
export function problemWords(problem, value) {
  const { type = "", msg = "" } = problem || {};
  const n = bound(msg);
  switch (type) {
    case "missing":
      return "This is required.";
    case "less_than_equal":
      return n ? `Must be at most ${n}.` : "The number is too large.";
    case "greater_than_equal":
      return n ? `Must be at least ${n}.` : "The number is too small.";
    case "int_type":
    case "int_parsing":
    case "int_from_float":
      return "Must be a whole number.";
    case "string_too_long":
      return n ? `Too long: at most ${n} characters.` : "Too long.";
    case "too_long":
      return n ? `Too many: at most ${n}.` : "Too many.";
    case "string_pattern_mismatch":
    case "string_too_short":
      return typeof value === "string" && !value.includes("\u0000")
        ? "Cannot be empty: write at least one character other than spaces."
        : "Must not contain a NUL character.";
    case "string_type":
      return value === null || value === undefined ? "Cannot be empty." : "Must be text.";
    case "literal_error":
      return `${msg.replace(/^Input should be/, "Must be")}.`.replace(/\.\.$/, ".");
    default:
      return msg ? `${msg.replace(/^Input should/, "Must").replace(/^Value error, /, "")}.`.replace(/\.\.$/, ".") : "Not accepted.";
  }
}

/** The places an ApiError names: [{loc: ["entries", "0", "order"], words}] (the "body" prefix left out). */
export function problemsOf(error, sent) {
  if (!error || error.code !== "VALIDATION") return [];
  const params = error.params || {};
  if (Array.isArray(params.errors) && params.errors.length) {
    return params.errors.map((problem) => {
      const loc = (problem.loc || []).map(String).filter((part, i) => !(i === 0 && part === "body"));
      let value = sent;
      for (const part of loc) value = value === null || value === undefined ? undefined : value[part];
      return { loc, words: problemWords(problem, value) };
    });
  }
  if (typeof params.field === "string") {
    // the storage's own check: "entries[0].depth: must be …"
    const loc = params.field.split(/[.[\]]+/).filter(Boolean);
    const words = String(error.message || "").replace(/^[^:]*:\s*/, "");
    return [{ loc, words: words ? `${words.charAt(0).toUpperCase()}${words.slice(1)}.`.replace(/\.\.$/, ".") : "Not accepted." }];
  }
  return [];
}

/**
 * Error slots for some inputs ({key: input}): each gets a `p.field-error` after it, tied to it by
 * aria-describedby, and aria-invalid while it shows a problem.
 */
export function errorSlots(inputs) {
  const slots = {};
  for (const [key, input] of Object.entries(inputs)) {
    const slot = h("p.field-error", { id: `${input.id}-error`, hidden: true, dataset: { errorFor: key } });
    input.insertAdjacentElement("afterend", slot);
    const described = (input.getAttribute("aria-describedby") || "").split(/\s+/).filter(Boolean);
    input.setAttribute("aria-describedby", [...described, slot.id].join(" "));
    slots[key] = { input, slot };
  }
  return {
    clear() {
      for (const { input, slot } of Object.values(slots)) {
        slot.hidden = true;
        slot.textContent = "";
        input.removeAttribute("aria-invalid");
      }
    },
    show(key, words) {
      const found = slots[key];
      if (!found) return false;
      found.slot.textContent = words;
      found.slot.hidden = false;
      found.input.setAttribute("aria-invalid", "true");
      return true;
    },
    /** Show each problem whose loc keyOf maps to a slot; focus the first. Returns the problems left over. */
    apply(problems, keyOf) {
      const left = [];
      let first = null;
      for (const problem of problems) {
        const key = keyOf(problem.loc);
        if (key && this.show(key, problem.words)) first = first || slots[key].input;
        else left.push(problem);
      }
      first?.focus();
      return left;
    },
  };
}
