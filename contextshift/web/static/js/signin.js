// Signing in: with no session, the UI asks for a token. The login URL the service prints (/?token=…) signs in
// without this page; here a token can be pasted. The session is an HttpOnly cookie the script never sees.

import { csrfHeaders } from "./api.js";
import { field, h, replace } from "./dom.js";

export function signInView(main, { failed = false } = {}) {
  const input = h("input#signin-token", {
    type: "password",
    name: "token",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
    placeholder: "cs_…",
  });
  const token = field(
    "Token",
    input,
    "The login URL printed by `contextshift serve` signs you in; or paste a token (`contextshift token create` makes one).",
  );
  const message = h("p.error-text#signin-error", { role: "alert", hidden: !failed }, failed ? "That token is not valid." : "");
  const submit = h("button.primary#signin-submit", { type: "submit" }, "Sign in");
  const form = h(
    "form.signin",
    {
      onsubmit: async (event) => {
        event.preventDefault();
        submit.disabled = true;
        message.hidden = true;
        try {
          const response = await fetch("/session", {
            method: "POST",
            headers: { "Content-Type": "application/json", Accept: "application/json", ...csrfHeaders() },
            body: JSON.stringify({ token: input.value.trim() }),
          });
          if (response.ok) {
            location.replace("/");
            return;
          }
          message.textContent = response.status === 401 ? "That token is not valid." : "Signing in failed; try again.";
        } catch {
          message.textContent = "The service cannot be reached. Is contextshift serve running?";
        }
        message.hidden = false;
        submit.disabled = false;
        input.focus();
      },
    },
    token.row,
    message,
    h("div.form-actions", submit),
  );
  replace(main, h("section.page.signin-page", h("h1", "Sign in to contextshift"), form));
  input.focus();
}
