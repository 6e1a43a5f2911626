// The memories editor (P4): a bot's memories, bot-wide and per chat: list, add, edit, delete.
// Shown in a bot's "Memories" tab (all of them) and in a chat's side panel (the bot-wide ones and that chat's).
// A memory reaches the prompt when it is relevant to the input (BM25, the 5 best): the preview shows which.

import { ApiError, del, get, patch, post } from "./api.js";
import { badge, field, h, replace, select, shorten, toast } from "./dom.js";
import { errorSlots, problemsOf } from "./fielderrors.js";
import { chatTitle } from "./store.js";

/**
 * Render the editor into container.
 * opts: {bot, chat (the chat whose panel this is, or null), chats (the bot's chats, for the scope picker),
 *        onChange() after every stored change (the chat refreshes its preview), heading ("h2" or "h3")}.
 * Returns {refresh()}.
 */
export function memoriesEditor(container, { bot, chat = null, chats = [], onChange = null, heading = "h2" }) {
  const st = { memories: [], loaded: false, error: null, editing: null, focus: null };
  const base = `/bots/${encodeURIComponent(bot.id)}/memories`;
  const chatName = (id) => {
    const found = chats.find((c) => c.id === id) || (chat && chat.id === id ? chat : null);
    return found ? chatTitle(found) : "another chat";
  };
  const scopeWords = (memory) => (memory.chat_id === null ? "every chat" : chat && memory.chat_id === chat.id ? "this chat" : chatName(memory.chat_id));

  // -- the "add" form: kept across renders, so a draft survives a refresh --------------------------------------
  const newText = h("textarea.memory-new", { name: "content", rows: 2, maxlength: 100000, placeholder: "e.g. Maria is vegetarian." });
  const scopeOptions = chat
    ? [
        [chat.id, "This chat only"],
        ["", "Every chat of this bot"],
      ]
    : [["", "Every chat of this bot"], ...chats.map((c) => [c.id, `Only in “${chatTitle(c)}”`])];
  const scope = select(scopeOptions, chat ? chat.id : "", { name: "chat_id" });
  const addButton = h("button.primary.small", { type: "submit" }, "Add memory");
  const addForm = h(
    "form.memory-add",
    { "aria-label": "Add a memory", novalidate: true, onsubmit: (event) => (event.preventDefault(), add()) },
    field("New memory", newText, "A fact the bot should remember. It is put into the prompt when the input is about it.").row,
    field("Remember it in", scope).row,
    h("div.actions", addButton),
  );
  const addErrors = errorSlots({ content: newText, chat_id: scope });

  const status = h("p.memory-status.visually-hidden", { role: "status" });
  const list = h("ul.memory-list", { "aria-label": "Memories" });

  async function load() {
    try {
      const query = chat ? `?chat_id=${encodeURIComponent(chat.id)}` : "";
      st.memories = (await get(`${base}${query}`)).memories;
      st.error = null;
    } catch (error) {
      st.error = error;
    }
    st.loaded = true;
  }

  function say(words) {
    status.textContent = words;
    toast(words);
  }

  async function changed() {
    await load();
    render();
    try {
      await onChange?.();
    } catch {
      /* the editor's own state is already up to date */
    }
  }

  async function add() {
    addErrors.clear();
    const body = { content: newText.value };
    if (scope.value) body.chat_id = scope.value;
    addButton.disabled = true;
    try {
      await post(base, body);
      newText.value = "";
      st.focus = { add: true };
      say("Memory added.");
      await changed();
    } catch (error) {
      showErrors(error, body, addErrors, () => newText.focus());
    } finally {
      addButton.disabled = false;
    }
  }

  function showErrors(error, sent, slots, fallbackFocus) {
    const left = slots.apply(problemsOf(error, sent), (loc) => loc[0] || null);
    if (left.length || !(error instanceof ApiError) || error.code !== "VALIDATION") {
      toast(error.message, "error");
      fallbackFocus?.();
    }
  }

  function item(memory, index) {
    const label = shorten(memory.content, 60);
    if (st.editing === memory.id) return editItem(memory, index);
    return h(
      "li.memory-item",
      { dataset: { memoryId: memory.id, scope: memory.chat_id === null ? "bot" : "chat" } },
      h("div.memory-head", badge(scopeWords(memory), memory.chat_id === null ? "info" : "")),
      h("p.memory-text.pre", memory.content),
      h(
        "div.actions",
        h(
          "button.small.edit-memory",
          {
            type: "button",
            "aria-label": `Edit memory: ${label}`,
            onclick: () => {
              st.editing = memory.id;
              st.focus = { id: memory.id, selector: "textarea" };
              render();
            },
          },
          "Edit",
        ),
        h("button.small.danger-outline.delete-memory", { type: "button", "aria-label": `Delete memory: ${label}`, onclick: () => remove(memory, index) }, "Delete"),
      ),
    );
  }

  function editItem(memory) {
    const text = h("textarea", { name: "content", rows: 3, maxlength: 100000, value: memory.content });
    let slots = null; // once the form holds the textarea
    const save = h("button.primary.small", { type: "submit" }, "Save");
    const cancel = () => {
      st.editing = null;
      st.focus = { id: memory.id, selector: ".edit-memory" };
      render();
    };
    text.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        event.stopPropagation();
        cancel();
      }
    });
    const li = h(
      "li.memory-item.editing",
      { dataset: { memoryId: memory.id } },
      h(
        "form.memory-edit",
        {
          "aria-label": "Edit memory",
          novalidate: true,
          onsubmit: async (event) => {
            event.preventDefault();
            slots.clear();
            const body = { content: text.value };
            save.disabled = true;
            try {
              await patch(`${base}/${encodeURIComponent(memory.id)}`, body);
              st.editing = null;
              st.focus = { id: memory.id, selector: ".edit-memory" };
              say("Memory saved.");
              await changed();
            } catch (error) {
              save.disabled = false;
              showErrors(error, body, slots, () => text.focus());
            }
          },
        },
        h("div.memory-head", badge(scopeWords(memory), memory.chat_id === null ? "info" : "")),
        field("Memory text", text).row,
        h("div.actions", save, h("button.small", { type: "button", onclick: cancel }, "Cancel")),
      ),
    );
    slots = errorSlots({ content: text });
    return li;
  }

  async function remove(memory, index) {
    if (!window.confirm(`Delete the memory “${shorten(memory.content, 80)}”?`)) return;
    try {
      await del(`${base}/${encodeURIComponent(memory.id)}`);
      const next = st.memories[index + 1] || st.memories[index - 1];
      st.focus = next ? { id: next.id, selector: ".edit-memory" } : { add: true };
      say("Memory deleted.");
      await changed();
    } catch (error) {
      toast(error.message, "error");
    }
  }

  function render() {
    const Heading = `${heading}.memories-heading`;
    const count = st.memories.length;
    replace(
      container,
      h(
        "section.memories-editor",
        { "aria-label": "Memories" },
        h(Heading, "Memories"),
        h(
          "p.help",
          chat
            ? "What the bot remembers in this chat: its bot-wide memories and this chat's. Up to five, the most relevant to your message, go into the prompt (the prompt view shows which)."
            : "What the bot remembers: bot-wide memories, and memories of one chat. Up to five, the most relevant to the message, go into each prompt.",
        ),
        addForm,
        st.error ? h("p.error-text", { role: "alert" }, st.error.message) : null,
        st.loaded && !st.error ? h("p.muted.memory-count", count ? `${count} memor${count === 1 ? "y" : "ies"}` : "No memories yet.") : null,
        count ? list : null,
        status,
      ),
    );
    replace(list, st.memories.map((m, i) => item(m, i)));
    const want = st.focus;
    st.focus = null;
    if (want?.add) newText.focus();
    else if (want?.id) container.querySelector(`[data-memory-id="${CSS.escape(want.id)}"] ${want.selector}`)?.focus();
  }

  const ready = (async () => {
    await load();
    render();
  })();
  return {
    ready,
    async refresh() {
      await load();
      render();
    },
  };
}
