// Signing in and out: with no session, the UI asks for a token. The login URL the service prints (/?token=…)
// signs in without this page; here a token can be pasted. The session is an HttpOnly cookie the script never
// sees. After signing in the user lands where they were going (a deep link like #/chat/<id> survives).

import { csrfHeaders } from "./api.js";
import { field, h, replace } from "./dom.js";

/** Where to go after signing in: the address the user asked for, unless it is the sign-in page itself. */
export function destination(hash) {
  const next = String(hash || "");
  return /^#\/(?!signin)/.test(next) ? next : "#/";
}

/** Load the app afresh at `hash`: a new sign-in starts with a new page (no catalog of the previous user). */
export function reloadAt(hash) {
  history.replaceState(null, "", `/${hash}`);
  location.reload();
}

/**
 * The sign-in page. failed: the login URL's token was refused; signedOut: the user has just signed out;
 * next: the address to open once signed in.
 */
export function signInView(main, { failed = false, signedOut = false, next = "#/" } = {}) {
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
            reloadAt(destination(next));
            return;
          }
          message.textContent =
            response.status === 401
              ? "That token is not valid."
              : response.status === 429
                ? "Too many failed sign-ins; wait a minute and try again."
                : "Signing in failed; try again.";
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
  replace(
    main,
    h(
      "section.page.signin-page",
      h("h1", "Sign in to contextshift"),
      signedOut ? h("p.ok-text#signed-out", { role: "status" }, "You are signed out.") : null,
      form,
    ),
  );
  input.focus();
}

/** End this browser's session (DELETE /session), then show the sign-in page. Throws when the service fails. */
export async function signOut() {
  const response = await fetch("/session", { method: "DELETE", headers: { Accept: "application/json", ...csrfHeaders() } });
  if (!response.ok) throw new Error("Signing out failed; try again.");
}
