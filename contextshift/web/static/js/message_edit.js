// Editing a message in place: the form, its Save / Save and regenerate / regenerate-from-here buttons, and the
// confirmation an older message asks for.

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
  // An older message: "regenerate from here" deletes what came after it, so it asks first.
  const later = regenerate || m.role !== "user" ? 0 : act.laterCount(m);
  const confirmRewind = h(
    "div.rewind-confirm",
    { hidden: true, role: "group", "aria-label": "Confirm regenerating from here" },
    h("span", `This deletes the ${later} later message${later === 1 ? "" : "s"}.`),
    " ",
    h("button.small.danger", { type: "button", dataset: { action: "confirm-rewind" }, onclick: () => act.editFrom(m, input.value) }, "Delete them and regenerate"),
    " ",
    actionButton("keep-later", "Keep them", () => {
      confirmRewind.hidden = true;
      rewind.focus();
    }),
  );
  const rewind = later
    ? actionButton("save-rewind", "Save and regenerate from here", () => {
        confirmRewind.hidden = false;
        confirmRewind.querySelector('[data-action="confirm-rewind"]').focus();
      })
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
      rewind,
      actionButton("cancel-edit", "Cancel", () => act.cancelEdit(m)),
    ),
    later ? confirmRewind : null,
  );
}
