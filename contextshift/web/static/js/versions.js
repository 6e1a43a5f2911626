// The version switcher of a message (‹ 2 / 3 ›): the versions of a regenerated reply, and the branches an edit
// of an older message made. Choosing a version is stored (the prompt follows the version shown).

import { h } from "./dom.js";
import { actionButton } from "./message_edit.js";

/** The switcher of ``m``, or null when it has one version; act.choose(m, index) shows another. */
export function versionSwitcher(m, act, busy) {
  const alternatives = m.alternatives || 1;
  if (alternatives <= 1) return null;
  return h(
    "span.alternatives",
    { role: "group", "aria-label": m.branch_point ? "Branches from this message" : "Versions of this reply" },
    actionButton("previous-alternative", "‹", () => act.choose(m, m.alternative - 1), { "aria-label": m.branch_point ? "Previous branch" : "Previous version", disabled: busy || m.alternative <= 0 }),
    h("span.alternative-count", { "aria-live": "polite" }, `${m.alternative + 1} / ${alternatives}`),
    actionButton("next-alternative", "›", () => act.choose(m, m.alternative + 1), { "aria-label": m.branch_point ? "Next branch" : "Next version", disabled: busy || m.alternative >= alternatives - 1 }),
  );
}
