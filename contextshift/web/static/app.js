// contextshift web UI: a hash router over a few views. Plain ES modules, no build step, nothing remote.

import { ApiError, get, patch, post } from "./js/api.js";
import { chatTitle, go, store } from "./js/store.js";
import { badge, clear, debounce, field, h, replace, select, toast, typingOutside } from "./js/dom.js";
import { chatView } from "./js/chat.js";
import { botsView, botView, newBotView } from "./js/bots.js";
import { providersView } from "./js/providers.js";
import { lorebooksView, lorebookView } from "./js/lorebooks.js";
import { onboardingView } from "./js/onboarding.js";
import { endpointView } from "./js/endpoint.js";
import { reloadAt, signInView, signOut } from "./js/signin.js";
import { accountView } from "./js/account.js";
import { importForm } from "./js/transfer.js";
import { showMessage } from "./js/jump.js";

// -- sidebar: chats list and "new chat" ------------------------------------------------------------------

let showNewChat = false;

function newChatForm() {
  const botSelect = select(
    store.bots.map((b) => [b.id, b.name]),
    store.bots[0]?.id,
    { name: "bot_id", required: true },
  );
  const typeSelect = select(
    [
      ["chat", "chat"],
      ["discuss", "discuss"],
      ["pipeline", "pipeline"],
    ],
    "chat",
    { name: "type" },
  );
  const title = h("input", { type: "text", name: "title", maxlength: 500, placeholder: "Optional" });
  const form = h(
    "form.new-chat.card",
    {
      "aria-label": "New chat",
      onsubmit: async (event) => {
        event.preventDefault();
        try {
          const { chat } = await post("/chats", {
            bot_id: botSelect.value,
            type: typeSelect.value,
            ...(title.value.trim() ? { title: title.value.trim() } : {}),
          });
          showNewChat = false;
          await store.refresh();
          go(`#/chat/${chat.id}`);
        } catch (error) {
          toast(error.message, "error");
        }
      },
    },
    field("Bot", botSelect).row,
    field("Type", typeSelect).row,
    field("Title", title).row,
    h(
      "div.actions",
      h("button.primary", { type: "submit" }, "Create chat"),
      h("button", { type: "button", onclick: () => ((showNewChat = false), renderSidebar()) }, "Cancel"),
    ),
  );
  queueMicrotask(() => botSelect.focus());
  return form;
}

// -- sidebar: rename a chat in place ---------------------------------------------------------------------

let renaming = null;
let renameDraft = null;

function focusChatLink(chatId) {
  queueMicrotask(() => document.querySelector(`#sidebar .chat-link[data-chat-id="${CSS.escape(chatId)}"]`)?.focus());
}

function renameForm(chat) {
  const input = h("input", {
    type: "text",
    name: "title",
    maxlength: 500,
    required: true,
    value: renameDraft ?? (chat.title || chatTitle(chat)),
    "aria-label": "Chat title",
  });
  // The sidebar re-renders when the chat list refreshes: what was typed, and the focus, survive it.
  input.addEventListener("input", () => (renameDraft = input.value));
  const done = () => {
    renaming = null;
    renameDraft = null;
    renderSidebar();
    focusChatLink(chat.id);
  };
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.preventDefault();
      event.stopPropagation();
      done();
    }
  });
  const form = h(
    "form.rename-chat-form",
    {
      "aria-label": "Rename chat",
      onsubmit: async (event) => {
        event.preventDefault();
        const title = input.value.trim();
        if (!title) {
          toast("A title needs at least one character.", "error");
          input.focus();
          return;
        }
        try {
          const { chat: renamed } = await patch(`/chats/${chat.id}`, { title });
          renaming = null;
          renameDraft = null;
          store.updateChat(renamed);
          focusChatLink(chat.id);
        } catch (error) {
          toast(error.message, "error");
          input.focus();
        }
      },
    },
    input,
    h("div.actions", h("button.primary.small", { type: "submit" }, "Save"), h("button.small", { type: "button", onclick: done }, "Cancel")),
  );
  queueMicrotask(() => {
    input.focus();
    input.select();
  });
  return form;
}

// -- sidebar: search chats by title and content -----------------------------------------------------------

const SEARCH_DELAY = 250;
const search = { query: "", results: null, error: null, serial: 0 };
// One input for the page's life: re-rendering the sidebar must not take focus or the text away from it.
const searchInput = h("input.chat-search#chat-search", {
  type: "search",
  placeholder: "Search chats",
  "aria-label": "Search chats by title and content",
  maxlength: 200,
  autocomplete: "off",
});

async function runSearch() {
  const query = searchInput.value.trim();
  const serial = ++search.serial;
  search.query = query;
  if (!query) {
    search.results = null;
    search.error = null;
    renderSidebar();
    return;
  }
  try {
    const { results } = await get(`/search/chats?q=${encodeURIComponent(query)}`);
    if (serial !== search.serial) return;
    search.results = results;
    search.error = null;
  } catch (error) {
    if (serial !== search.serial) return;
    search.results = [];
    search.error = error.message;
  }
  renderSidebar();
}
const scheduleSearch = debounce(runSearch, SEARCH_DELAY);
searchInput.addEventListener("input", scheduleSearch);
searchInput.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && searchInput.value) {
    event.preventDefault();
    event.stopPropagation();
    searchInput.value = "";
    runSearch();
  }
});

function searchResults() {
  const found = search.results || [];
  const status = h(
    "p.search-status.muted",
    { role: "status" },
    search.error ? `Search failed: ${search.error}` : found.length ? `${found.length} chat${found.length === 1 ? "" : "s"} found` : "No chat matches.",
  );
  const list = h(
    "ul.chat-list.search-results",
    { "aria-label": "Search results" },
    found.map(({ chat, message }) =>
      h(
        "li.chat-item",
        h(
          "a.chat-link",
          {
            href: `#/chat/${chat.id}`,
            dataset: { chatId: chat.id, messageId: message?.id || "" },
            // The chat opens on the message that matched (when it is among the loaded ones); in the chat that is
            // already open, the address stays the same: the chat view scrolls to it at once.
            onclick: (event) => {
              if (message && location.hash === `#/chat/${chat.id}`) {
                event.preventDefault();
                closeMenu();
                showMessage(chat.id, message.id);
                return;
              }
              store.pendingFocus = message ? { chatId: chat.id, messageId: message.id } : null;
            },
          },
          h("span.chat-title", chatTitle(chat)),
          h("span.chat-sub", message ? h("span.search-excerpt", message.excerpt) : "title matches"),
        ),
      ),
    ),
  );
  return [status, list];
}

function renderSidebar() {
  const sidebar = document.getElementById("sidebar");
  if (!sidebar) return;
  const current = (location.hash.match(/^#\/chat\/([^/]+)/) || [])[1];
  const head = h(
    "div.sidebar-head",
    h("h2", "Chats"),
    store.bots.length
      ? h(
          "button.primary.small",
          {
            type: "button",
            "aria-expanded": String(showNewChat),
            onclick: () => {
              showNewChat = !showNewChat;
              renderSidebar();
            },
          },
          "+ New chat",
        )
      : null,
  );
  const list = h("ul.chat-list", { "aria-label": "Chats" });
  for (const chat of store.chats) {
    const bot = store.bot(chat.bot_id);
    if (chat.id === renaming) {
      list.append(h("li.chat-item", renameForm(chat)));
      continue;
    }
    list.append(
      h(
        "li.chat-item",
        h(
          "a.chat-link",
          { href: `#/chat/${chat.id}`, "aria-current": chat.id === current ? "page" : null, dataset: { chatId: chat.id } },
          h("span.chat-title", chatTitle(chat)),
          h("span.chat-sub", badge(chat.type, `type-${chat.type}`), " ", bot ? bot.name : ""),
        ),
        h(
          "button.icon.rename-chat",
          {
            type: "button",
            "aria-label": `Rename ${chatTitle(chat)}`,
            title: "Rename",
            onclick: () => {
              renaming = chat.id;
              renameDraft = null;
              renderSidebar();
            },
          },
          "✎",
        ),
      ),
    );
  }
  const hadFocus = document.activeElement === searchInput;
  const renameFocused = document.activeElement?.closest?.(".rename-chat-form") != null;
  replace(
    sidebar,
    head,
    showNewChat && store.bots.length ? newChatForm() : null,
    store.chats.length ? h("div.search-box", { role: "search" }, searchInput) : null,
    search.query && search.results
      ? searchResults()
      : store.chats.length
        ? list
        : h("p.muted", store.bots.length ? "No chats yet." : "Set up a bot first — or import the examples."),
    h(
      "div.sidebar-foot",
      h("a", { href: "#/welcome" }, "Getting started & examples"),
      // On a phone the header has no room for the account link: the menu has it.
      store.me ? h("a.phone-only#menu-account-link", { href: "#/account" }, `Account (${store.me.name}): tokens, theme, sign out`) : null,
    ),
  );
  if (hadFocus) searchInput.focus();
  if (renameFocused) sidebar.querySelector(".rename-chat-form input")?.focus();
}

// -- header: theme switch, the account page and signing out ------------------------------------------------

const THEME_WORDS = { system: "System theme", light: "Light", dark: "Dark" };

function themeSwitch() {
  const theme = globalThis.contextshiftTheme;
  if (!theme) return null;
  const choose = select(
    theme.choices.map((c) => [c, THEME_WORDS[c]]),
    theme.get(),
    { class: "theme-switch", "aria-label": "Colour theme", title: "Colour theme (remembered in this browser)" },
  );
  choose.addEventListener("change", () => theme.set(choose.value));
  return choose;
}

async function signOutNow(button) {
  button.disabled = true;
  try {
    await signOut();
    reloadAt("#/signin?signed-out=1");
  } catch (error) {
    button.disabled = false;
    toast(error.message, "error");
  }
}

/** The header's right end: the theme switch always; the account link and "Sign out" while signed in. */
function renderAccountArea(signedIn) {
  const area = document.getElementById("account-area");
  if (!area) return;
  const me = signedIn ? store.me : null;
  const signOutButton = me
    ? h("button.small#sign-out", { type: "button", onclick: () => signOutNow(signOutButton) }, "Sign out")
    : null;
  replace(
    area,
    themeSwitch(),
    me
      ? h(
          "a.account-link#account-link",
          {
            href: "#/account",
            "aria-current": location.hash === "#/account" ? "page" : null,
            title: `Signed in as ${me.name}: tokens${me.role === "admin" ? " and users" : ""}`, dataset: { nav: "account" } },
          h("span.account-icon", { "aria-hidden": "true" }, "◉"),
          h("span.account-name", me.name),
        )
      : null,
    signOutButton,
  );
  area.hidden = false;
}

function closeMenu() {
  document.body.classList.remove("menu-open");
  document.getElementById("menu-toggle")?.setAttribute("aria-expanded", "false");
}

// -- home ------------------------------------------------------------------------------------------------

async function homeView(main) {
  if (store.empty) return onboardingView(main, [], { store, go, auto: true });
  const recent = store.chats.slice(0, 6);
  replace(
    main,
    h(
      "section.page.home",
      h("h1", "Chats"),
      h(
        "p.lead",
        "Pick a chat, or start a new one. Each chat shows what the model actually saw: the context meter by the composer, and the prompt view of the last generation.",
      ),
      recent.length
        ? h(
            "ul.card-list",
            recent.map((chat) =>
              h(
                "li.card",
                h("a.card-title", { href: `#/chat/${chat.id}` }, chatTitle(chat)),
                h("p.muted", badge(chat.type, `type-${chat.type}`), " ", store.bot(chat.bot_id)?.name || ""),
              ),
            ),
          )
        : h("p", "No chats yet."),
      h(
        "div.actions",
        h(
          "button.primary",
          {
            type: "button",
            onclick: () => {
              showNewChat = true;
              renderSidebar();
              document.body.classList.add("menu-open");
            },
          },
          "+ New chat",
        ),
        h("a.button", { href: "#/bots" }, "Bots"),
        h("a.button", { href: "#/providers" }, "Providers & models"),
      ),
      importForm({ store, go }),
    ),
  );
  return null;
}

// -- router ----------------------------------------------------------------------------------------------

const routes = [
  [/^#?\/?$/, homeView, "chats"],
  [/^#\/welcome$/, (main) => onboardingView(main, [], { store, go, auto: false }), "chats"],
  [/^#\/chat\/([^/]+)$/, (main, params) => chatView(main, params, { store, go }), "chats"],
  [/^#\/bots$/, (main) => botsView(main, [], { store, go }), "bots"],
  [/^#\/bot\/new$/, (main) => newBotView(main, [], { store, go }), "bots"],
  [/^#\/bot\/([^/]+)(?:\/(settings|memories|compaction))?$/, (main, params) => botView(main, params, { store, go }), "bots"],
  [/^#\/lorebooks$/, (main) => lorebooksView(main, [], { store, go }), "bots"],
  [/^#\/lorebook\/([^/]+)$/, (main, params) => lorebookView(main, params, { store, go }), "bots"],
  [/^#\/providers$/, (main) => providersView(main, [], { store, go }), "providers"],
  [/^#\/endpoint(?:\/([^/]+))?$/, (main, params) => endpointView(main, params), "endpoint"],
  [/^#\/account$/, (main) => accountView(main, [], { store, go, signOut: (button) => signOutNow(button) }), "account"],
];

let cleanup = null;
let routing = 0;

async function route() {
  const serial = ++routing;
  const main = document.getElementById("main");
  if (typeof cleanup === "function") {
    try {
      cleanup();
    } catch {
      /* a view's cleanup never blocks navigation */
    }
  }
  cleanup = null;
  closeMenu();
  const hash = location.hash || "#/";
  if (hash.startsWith("#/signin")) {
    renderAccountArea(false);
    signInView(main, { failed: hash.includes("failed"), signedOut: hash.includes("signed-out") });
    return;
  }
  const found = routes.find(([pattern]) => pattern.test(hash));
  document.querySelectorAll(".mainnav a, #account-link").forEach((a) => {
    a.toggleAttribute("aria-current", false);
    if (found && a.dataset.nav === found[2]) a.setAttribute("aria-current", "page");
  });
  try {
    if (!store.loaded) await store.refresh();
    else renderSidebar();
    if (serial !== routing) return;
    if (!found) {
      replace(main, h("section.page", h("h1", "Not found"), h("p", h("a", { href: "#/" }, "Back to the chats"))));
      return;
    }
    const params = hash.match(found[0]).slice(1);
    clear(main);
    document.title = "contextshift";
    const result = await found[1](main, params);
    if (serial === routing) {
      cleanup = result || null;
      // Keyboard and screen-reader users land in the new view, not on the link they left; but a field the user
      // went on to type in while the view loaded (the sidebar's search or rename) keeps the focus.
      if (!main.contains(document.activeElement) && !typingOutside(main)) main.focus({ preventScroll: true });
    } else if (typeof result === "function") result();
  } catch (error) {
    if (serial !== routing) return;
    if (error instanceof ApiError && error.status === 401) {
      // Signed out (or the session ended): sign in, then go on to the address that was asked for.
      store.loaded = false;
      renderAccountArea(false);
      clear(document.getElementById("sidebar"));
      signInView(main, { next: hash });
      return;
    }
    const message = error instanceof ApiError ? error.message : String(error?.message || error);
    replace(
      main,
      h(
        "section.page",
        h("h1", "Something went wrong"),
        h("p.error-text", { role: "alert" }, message),
        h("button", { type: "button", onclick: () => route() }, "Try again"),
      ),
    );
  }
}

function start() {
  const toggle = document.getElementById("menu-toggle");
  toggle.addEventListener("click", () => {
    const open = !document.body.classList.contains("menu-open");
    document.body.classList.toggle("menu-open", open);
    toggle.setAttribute("aria-expanded", String(open));
    if (open) document.querySelector("#sidebar a, #sidebar button")?.focus();
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && document.body.classList.contains("menu-open")) {
      closeMenu();
      toggle.focus();
    }
  });
  store.onChange(renderSidebar);
  store.onChange(() => renderAccountArea(true));
  window.addEventListener("hashchange", route);
  route();
}

start();

