// The account page: who is signed in, the theme, the user's API tokens (create with the secret shown once,
// rename, revoke), their browser sessions (list, end) and, for admins, the users (create, role, disable, delete).

import { ApiError, del, get, patch, post } from "./api.js";
import { badge, checkbox, field, h, nextId, replace, select, toast, when } from "./dom.js";
import { reloadAt } from "./signin.js";

const THEMES = [
  ["system", "Same as the system"],
  ["light", "Light"],
  ["dark", "Dark"],
];

/** Copy text to the clipboard; true when it worked. */
export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    return false;
  }
}

/** A secret shown once (a new token): the value, a copy button, and "Done" that hides it for good. */
function secretBox(label, secret, onDone) {
  const code = h("code.secret-value#new-secret", secret);
  const box = h(
    "div.secret-box",
    { role: "region", "aria-label": label },
    h("p", h("strong", label), " — shown this once: copy it now, it cannot be shown again."),
    h("p", code),
    h(
      "div.actions",
      h(
        "button.small.primary",
        {
          type: "button",
          dataset: { action: "copy-secret" },
          onclick: async () => toast((await copyText(secret)) ? "Copied." : "Copying failed: select the token and copy it.", "info"),
        },
        "Copy",
      ),
      h("button.small", { type: "button", dataset: { action: "done-secret" }, onclick: () => (box.remove(), onDone?.()) }, "Done"),
    ),
  );
  return box;
}

function errorLine(error) {
  const text = error instanceof ApiError ? `${error.message} (${error.code})` : String(error?.message || error);
  return h("p.error-text", { role: "alert" }, text);
}

/** Who is signed in, the theme switch, and signing out. */
function youSection({ store, signOut }) {
  const me = store.me;
  const theme = globalThis.contextshiftTheme;
  const name = nextId("theme");
  const radios = theme
    ? h(
        "fieldset.theme-choice",
        h("legend", "Theme"),
        THEMES.map(([value, label]) => {
          const input = h("input", { type: "radio", name, value, id: `${name}-${value}`, checked: theme.get() === value });
          input.addEventListener("change", () => {
            theme.set(value);
            const header = document.querySelector(".theme-switch");
            if (header) header.value = value;
          });
          return h("div.field.check", input, h("label", { for: input.id }, label));
        }),
        h("p.help", "Remembered in this browser."),
      )
    : null;
  const button = h("button#account-sign-out", { type: "button", onclick: () => signOut(button) }, "Sign out");
  return h(
    "section.account-block",
    { "aria-labelledby": "account-you-h" },
    h("h2#account-you-h", "You"),
    h("p", "Signed in as ", h("strong#account-name", me?.name || "?"), me ? ` (${me.role})` : ""),
    radios,
    h("div.actions", button),
  );
}

// -- API tokens --------------------------------------------------------------------------------------------

function tokensSection() {
  const section = h("section.account-block#tokens", { "aria-labelledby": "account-tokens-h" });
  const state = { tokens: [], renaming: null, revoking: null, error: null, secret: null };

  async function load() {
    try {
      state.tokens = (await get("/tokens")).tokens;
      state.error = null;
    } catch (error) {
      state.error = error;
    }
    render();
  }

  const name = h("input#new-token-name", { type: "text", name: "name", maxlength: 200, placeholder: "e.g. my script", autocomplete: "off" });
  const create = h(
    "form.token-create",
    {
      "aria-label": "Create a token",
      onsubmit: async (event) => {
        event.preventDefault();
        try {
          const made = await post("/tokens", { name: name.value.trim() });
          state.secret = { name: made.token.name || "New token", value: made.secret };
          name.value = "";
          await load();
          section.querySelector('[data-action="copy-secret"]')?.focus();
        } catch (error) {
          toast(error.message, "error");
        }
      },
    },
    field("Name", name, "What the token is for. A token acts as you on the API (/api/v2 and the OpenAI-compatible /v1).").row,
    h("div.actions", h("button.primary", { type: "submit" }, "Create token")),
  );

  function renameRow(token) {
    const input = h("input", { type: "text", value: token.name, maxlength: 200, "aria-label": `New name for ${token.name || "the unnamed token"}` });
    const done = () => ((state.renaming = null), render());
    input.addEventListener("keydown", (event) => event.key === "Escape" && (event.preventDefault(), done()));
    queueMicrotask(() => input.focus());
    return h(
      "form.token-rename",
      {
        onsubmit: async (event) => {
          event.preventDefault();
          try {
            await patch(`/tokens/${encodeURIComponent(token.id)}`, { name: input.value.trim() });
            state.renaming = null;
            await load();
            section.querySelector(`[data-token-id="${CSS.escape(token.id)}"] [data-action="rename-token"]`)?.focus();
          } catch (error) {
            toast(error.message, "error");
          }
        },
      },
      input,
      h("button.small.primary", { type: "submit" }, "Save"),
      h("button.small", { type: "button", onclick: done }, "Cancel"),
    );
  }

  function actions(token) {
    const label = token.name || "unnamed token";
    if (state.revoking === token.id) {
      return h(
        "div.actions.confirm",
        { role: "group", "aria-label": `Confirm revoking ${label}` },
        h("span", "Revoke it? What uses it stops working."),
        h(
          "button.small.danger",
          {
            type: "button",
            dataset: { action: "confirm-revoke" },
            onclick: async () => {
              try {
                await del(`/tokens/${encodeURIComponent(token.id)}`);
                state.revoking = null;
                toast(`Revoked “${label}”.`);
                await load();
              } catch (error) {
                toast(error.message, "error");
              }
            },
          },
          "Revoke",
        ),
        h("button.small", { type: "button", onclick: () => ((state.revoking = null), render()) }, "Keep"),
      );
    }
    return h(
      "div.actions",
      h("button.small", { type: "button", dataset: { action: "rename-token" }, "aria-label": `Rename ${label}`, onclick: () => ((state.renaming = token.id), render()) }, "Rename"),
      h(
        "button.small.danger-outline",
        {
          type: "button",
          dataset: { action: "revoke-token" },
          "aria-label": `Revoke ${label}`,
          onclick: () => {
            state.revoking = token.id;
            render();
            section.querySelector('[data-action="confirm-revoke"]')?.focus();
          },
        },
        "Revoke",
      ),
    );
  }

  function render() {
    const table = state.tokens.length
      ? h(
          "table.data-table.token-table",
          h("caption.visually-hidden", "Your API tokens"),
          h("thead", h("tr", ["Name", "Created", "Last used", "Actions"].map((t) => h("th", { scope: "col" }, t)))),
          h(
            "tbody",
            state.tokens.map((token) =>
              h(
                "tr",
                { dataset: { tokenId: token.id } },
                h("td.token-name", { "data-label": "Name" }, state.renaming === token.id ? renameRow(token) : token.name || h("span.muted", "(no name)")),
                h("td", { "data-label": "Created" }, when(token.created_at)),
                h("td", { "data-label": "Last used" }, token.last_used_at ? when(token.last_used_at) : "never"),
                h("td", { "data-label": "Actions" }, state.renaming === token.id ? null : actions(token)),
              ),
            ),
          ),
        )
      : h("p.muted#no-tokens", "No API tokens yet.");
    replace(
      section,
      h("h2#account-tokens-h", "API tokens"),
      state.secret ? secretBox(`Token “${state.secret.name}”`, state.secret.value, () => ((state.secret = null), name.focus())) : null,
      create,
      state.error ? errorLine(state.error) : table,
    );
  }

  render();
  load();
  return section;
}

// -- browser sessions --------------------------------------------------------------------------------------

/** The user's browser sessions (GET /sessions): when each was opened, with which token, until when; ending
 * one (DELETE /sessions/{id}) signs that browser out at once. Ending this browser's own shows the sign-in page. */
function sessionsSection() {
  const section = h("section.account-block#sessions", { "aria-labelledby": "account-sessions-h" });
  const state = { sessions: [], ending: null, error: null };

  async function load() {
    try {
      state.sessions = (await get("/sessions")).sessions;
      state.error = null;
    } catch (error) {
      state.error = error;
    }
    render();
  }

  function describe(session) {
    return session.current ? "of this browser" : `opened ${when(session.created_at)}`;
  }

  async function end(session) {
    try {
      await del(`/sessions/${encodeURIComponent(session.id)}`);
    } catch (error) {
      toast(error.message, "error");
      state.ending = null;
      await load();
      return;
    }
    state.ending = null;
    if (session.current) {
      // This browser's cookie signs no one in any more: the sign-in page, the same as "Sign out".
      reloadAt("#/signin?signed-out=1");
      return;
    }
    toast("Ended the session: that browser is signed out.");
    await load();
    section.querySelector("#account-sessions-h")?.focus();
  }

  function actions(session) {
    const label = describe(session);
    if (state.ending === session.id) {
      return h(
        "div.actions.confirm",
        { role: "group", "aria-label": `Confirm ending the session ${label}` },
        h("span", session.current ? "End it? This browser is signed out." : "End it? That browser is signed out."),
        h("button.small.danger", { type: "button", dataset: { action: "confirm-end-session" }, onclick: () => end(session) }, "End session"),
        h("button.small", { type: "button", onclick: () => ((state.ending = null), render()) }, "Keep"),
      );
    }
    return h(
      "button.small.danger-outline",
      {
        type: "button",
        dataset: { action: "end-session" },
        "aria-label": `End session ${label}`, // the visible text first (WCAG 2.5.3)
        onclick: () => {
          state.ending = session.id;
          render();
          section.querySelector('[data-action="confirm-end-session"]')?.focus();
        },
      },
      "End session",
    );
  }

  function openedBy(session) {
    if (session.opened_by_name) return session.opened_by_name;
    if (session.opened_by) return h("span.muted", "(unnamed token)");
    return h("span.muted", "—");
  }

  function render() {
    const table = state.sessions.length
      ? h(
          "table.data-table.session-table",
          h("caption.visually-hidden", "Your browser sessions"),
          h("thead", h("tr", ["Opened", "With token", "Last used", "Expires", "Actions"].map((t) => h("th", { scope: "col" }, t)))),
          h(
            "tbody",
            state.sessions.map((session) =>
              h(
                "tr",
                { dataset: { sessionId: session.id, current: session.current ? "true" : "false" } },
                h(
                  "td",
                  { "data-label": "Opened" },
                  when(session.created_at),
                  session.current ? [" ", badge("this browser", "info.this-browser")] : null,
                ),
                h("td", { "data-label": "With token" }, openedBy(session)),
                h("td", { "data-label": "Last used" }, session.last_used_at ? when(session.last_used_at) : "never"),
                h("td", { "data-label": "Expires" }, when(session.expires_at)),
                h("td", { "data-label": "Actions" }, actions(session)),
              ),
            ),
          ),
        )
      : h("p.muted#no-sessions", "No browser sessions.");
    replace(
      section,
      h("h2#account-sessions-h", { tabindex: "-1" }, "Browser sessions"),
      h("p.help", "Each browser you signed in with has a session. Ending one signs that browser out at once; revoking the token a session was opened with ends it too."),
      state.error ? errorLine(state.error) : table,
    );
  }

  render();
  load();
  return section;
}

// -- users (admins) ----------------------------------------------------------------------------------------

function usersSection({ store }) {
  const section = h("section.account-block#users", { "aria-labelledby": "account-users-h" });
  const state = { users: [], deleting: null, error: null, secret: null };

  async function load() {
    try {
      state.users = (await get("/users")).users;
      state.error = null;
    } catch (error) {
      state.error = error;
    }
    render();
  }

  /** A change to one user; on a refusal the list shows what is stored again (nothing changed). */
  async function change(user, body, done) {
    try {
      await patch(`/users/${encodeURIComponent(user.id)}`, body);
      toast(done);
    } catch (error) {
      toast(error.message, "error");
    }
    await load();
  }

  const name = h("input#new-user-name", { type: "text", name: "name", maxlength: 100, required: true, autocomplete: "off" });
  const role = select(
    [
      ["user", "user"],
      ["admin", "admin"],
    ],
    "user",
    { name: "role", id: "new-user-role" },
  );
  const create = h(
    "form.user-create",
    {
      "aria-label": "Create a user",
      onsubmit: async (event) => {
        event.preventDefault();
        try {
          const made = await post("/users", { name: name.value.trim(), role: role.value });
          state.secret = { name: made.user.name, value: made.token };
          name.value = "";
          role.value = "user";
          await load();
          section.querySelector('[data-action="copy-secret"]')?.focus();
        } catch (error) {
          toast(error.message, "error");
        }
      },
    },
    h("div.inline-fields", field("Name", name).row, field("Role", role).row),
    h("div.actions", h("button.primary", { type: "submit" }, "Create user")),
  );

  function row(user) {
    const you = user.id === store.me?.id;
    const roleSelect = select(
      [
        ["user", "user"],
        ["admin", "admin"],
      ],
      user.role,
      { "aria-label": `Role of ${user.name}`, dataset: { action: "user-role" } },
    );
    roleSelect.addEventListener("change", () => change(user, { role: roleSelect.value }, `${user.name} is now ${roleSelect.value === "admin" ? "an admin" : "a user"}.`));
    const disabled = checkbox("disabled", { checked: user.disabled, dataset: { action: "user-disabled" }, "aria-label": `${user.name} is disabled` });
    disabled.input.addEventListener("change", () => change(user, { disabled: disabled.input.checked }, `${user.name} is ${disabled.input.checked ? "disabled" : "enabled"}.`));
    const remove =
      state.deleting === user.id
        ? h(
            "div.actions.confirm",
            { role: "group", "aria-label": `Confirm deleting ${user.name}` },
            h("span", "Delete this user, their bots and chats?"),
            h(
              "button.small.danger",
              {
                type: "button",
                dataset: { action: "confirm-delete-user" },
                onclick: async () => {
                  try {
                    await del(`/users/${encodeURIComponent(user.id)}`);
                    toast(`Deleted ${user.name}.`);
                  } catch (error) {
                    toast(error.message, "error");
                  }
                  state.deleting = null;
                  await load();
                },
              },
              "Delete",
            ),
            h("button.small", { type: "button", onclick: () => ((state.deleting = null), render()) }, "Keep"),
          )
        : h(
            "button.small.danger-outline",
            {
              type: "button",
              dataset: { action: "delete-user" },
              "aria-label": `Delete ${user.name}`,
              onclick: () => {
                state.deleting = user.id;
                render();
                section.querySelector('[data-action="confirm-delete-user"]')?.focus();
              },
            },
            "Delete",
          );
    return h(
      "tr",
      { dataset: { userId: user.id, userName: user.name } },
      h("td", { "data-label": "Name" }, user.name, you ? h("span.muted", " (you)") : null),
      h("td", { "data-label": "Role" }, roleSelect),
      h("td", { "data-label": "Disabled" }, disabled.row),
      h("td", { "data-label": "Created" }, when(user.created_at)),
      h("td", { "data-label": "Actions" }, remove),
    );
  }

  function render() {
    replace(
      section,
      h("h2#account-users-h", "Users"),
      h("p.help", "Each user has their own bots, chats and tokens. A disabled user's tokens and sessions stop working until enabled again."),
      state.secret ? secretBox(`First token of ${state.secret.name}`, state.secret.value, () => ((state.secret = null), name.focus())) : null,
      create,
      state.error
        ? errorLine(state.error)
        : h(
            "table.data-table.user-table",
            h("caption.visually-hidden", "Users"),
            h("thead", h("tr", ["Name", "Role", "Disabled", "Created", "Actions"].map((t) => h("th", { scope: "col" }, t)))),
            h("tbody", state.users.map(row)),
          ),
    );
  }

  render();
  load();
  return section;
}

/** #/account. ctx: {store, signOut(button)}. */
export async function accountView(main, _params, { store, signOut }) {
  // Who is signed in, asked afresh: a session ended from another browser gets the sign-in page here (the router
  // shows it on a 401), not a page of refusals.
  store.me = (await get("/me")).user;
  document.title = "Account · contextshift";
  replace(
    main,
    h(
      "section.page.account-page",
      h("h1", "Account"),
      youSection({ store, signOut }),
      tokensSection(),
      sessionsSection(),
      store.me?.role === "admin" ? usersSection({ store }) : null,
    ),
  );
  return null;
}
