// What several views share: the catalog (providers, models, bots, chats), loaded once, refreshed after changes.

import { get } from "./api.js";

const listeners = new Set();

export const store = {
  providers: [],
  models: [],
  bots: [],
  chats: [],
  /** The signed-in user ({id, name, role, disabled}): the header's account menu and the admin pages. */
  me: null,
  loaded: false,
  /** {chatId, messageId} a search result asks the chat view to show once it opens. */
  pendingFocus: null,
  async refresh() {
    const [providers, models, bots, chats, me] = await Promise.all([
      get("/providers"),
      get("/models"),
      get("/bots"),
      get("/chats?limit=500"),
      get("/me"),
    ]);
    this.me = me.user;
    this.providers = providers.providers;
    this.models = models.models;
    this.bots = bots.bots;
    this.chats = chats.chats;
    this.loaded = true;
    listeners.forEach((fn) => fn(this));
    return this;
  },
  /** Put a changed chat (renamed, titled by its first message) into the list and tell the views. */
  updateChat(chat) {
    const at = this.chats.findIndex((c) => c.id === chat.id);
    if (at >= 0) this.chats[at] = chat;
    else this.chats.unshift(chat);
    listeners.forEach((fn) => fn(this));
  },
  onChange(fn) {
    listeners.add(fn);
    return () => listeners.delete(fn);
  },
  bot(id) {
    return this.bots.find((b) => b.id === id) || null;
  },
  model(id) {
    return this.models.find((m) => m.id === id) || null;
  },
  provider(id) {
    return this.providers.find((p) => p.id === id) || null;
  },
  chat(id) {
    return this.chats.find((c) => c.id === id) || null;
  },
  get empty() {
    return this.bots.length === 0;
  },
};

export function chatTitle(chat) {
  if (chat.title) return chat.title;
  const bot = store.bot(chat.bot_id);
  return `Chat with ${bot ? bot.name : "a bot"}`;
}

export function modelLabel(model) {
  if (!model) return "no model";
  const provider = store.provider(model.provider_id);
  return provider ? `${model.name} · ${provider.name}` : model.name;
}

export function go(hash) {
  if (location.hash === hash) window.dispatchEvent(new HashChangeEvent("hashchange"));
  else location.hash = hash;
}
