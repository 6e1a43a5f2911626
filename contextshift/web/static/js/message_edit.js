// Editing a message in place: the form and its Save / Save and regenerate / Save as a new branch buttons (an older
// message branches: what came after it stays reachable through the version switcher).

import { h } from "./dom.js";

export function actionButton(action, label, onclick, attrs = {}) {
  return h("button.small", { type: "button", dataset: { action }, onclick, ...attrs }, label);
}

export function editForm(m, ui, act) {
  const input = h("textarea.edit-text", { rows: 4, "aria-label": "Edit the message", maxlength: 2000000 });
  input.value = ui.draft ?? (typeof m.content === "string" ? m.content : "");
  input.addEventListener("input", () => (ui.draft = input.value));
  const regenerate = act.canRegenerateAfter(m);
  const save = (again) => act.edit(m, input.value, again);
  // An older message: the edit becomes a new branch; what came after it stays with the version shown now.
  const later = regenerate || m.role !== "user" ? 0 : act.laterCount(m);
  const branch = later
    ? actionButton("save-branch", "Save as a new branch and regenerate", () => act.branchFrom(m, input.value), {
        "aria-describedby": `branch-hint-${m.id}`,
      })
    : null;
  const hint = later
    ? h(
        "p.hint.branch-hint",
        { id: `branch-hint-${m.id}` },
        `The ${later} later message${later === 1 ? "" : "s"} stay${later === 1 ? "s" : ""} with the current version of this message: page back to ${later === 1 ? "it" : "them"} with ‹ ›.`,
      )
    : null;
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.preventDefault();
      event.stopPropagation();
      act.cancelEdit(m);
    }
  });
  return h(
    "form.edit-form",
    { "aria-label": "Edit message", onsubmit: (event) => (event.preventDefault(), save(false)) },
    input,
    h(
      "div.actions",
      h("button.small.primary", { type: "submit", dataset: { action: "save-edit" } }, "Save"),
      regenerate ? actionButton("save-regenerate", "Save and regenerate", () => save(true)) : null,
      branch,
      actionButton("cancel-edit", "Cancel", () => act.cancelEdit(m)),
    ),
    hint,
  );
}
