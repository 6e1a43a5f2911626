// The chat's header: its title (kept in step with the chat list), its type, bot and model, the buttons that open
// the side panel, and deleting the chat.

import { del } from "./api.js";
import { badge, h, toast } from "./dom.js";
import { chatTitle } from "./store.js";
import { modelPicker } from "./chat_model.js";
import { draftKey } from "./chat_composer.js";
import { exportMenu } from "./transfer.js";

/**
 * onOpen(tab, mode): open the side panel; promptMode(): which prompt the Prompt button shows; botModel: the bot's
 * chat model; onModel(model): the chat's model was changed (the picker, chat_model.js).
 */
export function chatHead({ chat, bot, botModel, store, go, onOpen, promptMode, onModel }) {
  const titleEl = h("h1.chat-heading", chatTitle(chat));
  document.title = `${chatTitle(chat)} · contextshift`;
  const el = h(
    "header.chat-head",
    h(
      "div.chat-head-main",
      titleEl,
      h(
        "p.chat-meta",
        badge(chat.type, `type-${chat.type}`),
        " ",
        h("a", { href: `#/bot/${bot.id}` }, bot.name),
        " · ",
        modelPicker({ chat, botModel, store, onChange: onModel }),
        botModel || chat.model_id ? null : [" ", h("span.warn-text", "no chat model (preview only)")],
      ),
    ),
    h(
      "div.chat-head-actions",
      h("button.small", { type: "button", onclick: () => onOpen("status") }, "Status"),
      h("button.small", { type: "button", onclick: () => onOpen("prompt", promptMode()) }, "Prompt"),
      h("button.small", { type: "button", onclick: () => onOpen("memories") }, "Memories"),
      exportMenu(chat),
      h(
        "button.small.danger-outline",
        { type: "button", "aria-label": "Delete chat", onclick: () => deleteChat() },
        h("span.wide-only", "Delete chat"),
        h("span.narrow-only", { "aria-hidden": "true" }, "Delete"),
      ),
    ),
  );

  async function deleteChat() {
    const ok = window.confirm(`Delete the chat “${chatTitle(chat)}” and all its messages?`);
    if (!ok) return;
    try {
      await del(`/chats/${chat.id}`);
      localStorage.removeItem(draftKey(chat.id));
      await store.refresh();
      go("#/");
    } catch (error) {
      toast(error.message, "error");
    }
  }

  // A title given elsewhere (the sidebar, or the first message on the server) shows here too.
  const unwatch = store.onChange(() => {
    const known = store.chat(chat.id);
    if (!known || known.title === chat.title) return;
    chat.title = known.title;
    titleEl.textContent = chatTitle(chat);
    document.title = `${chatTitle(chat)} · contextshift`;
  });

  return { el, dispose: unwatch };
}
