// The chat's model picker: the bot's chat model by default, or another chat model for this chat only. The choice
// is stored on the chat (PATCH model_id); the next prompt (meter, prompt view) and the next turn use its window,
// tokenizer and provider, and the prompt view's audit names the model that answered.

import { patch } from "./api.js";
import { h, toast } from "./dom.js";
import { modelLabel } from "./store.js";

/** chat: the chat (its model_id changes here); botModel: the bot's model or null; onChange(model): chosen. */
export function modelPicker({ chat, botModel, store, onChange }) {
  const choices = store.models.filter((m) => m.type === "chat" && (m.enabled !== false || m.id === chat.model_id));
  const bots = botModel ? `Bot's model (${modelLabel(botModel)})` : "Bot's model (none: preview only)";
  const select = h(
    "select.chat-model-select#chat-model",
    { name: "model_id", title: "The model this chat's turns use; the bot's unless you choose another" },
    h("option", { value: "" }, bots),
    choices.map((m) => h("option", { value: m.id }, modelLabel(m))),
  );
  select.value = chat.model_id || "";
  select.addEventListener("change", async () => {
    const before = chat.model_id || "";
    select.disabled = true;
    try {
      const { chat: saved } = await patch(`/chats/${encodeURIComponent(chat.id)}`, { model_id: select.value || null });
      chat.model_id = saved.model_id;
      store.updateChat(saved);
      await onChange(saved.model_id ? store.model(saved.model_id) : botModel);
    } catch (error) {
      select.value = before;
      toast(error.message, "error");
    } finally {
      select.disabled = false;
      select.focus();
    }
  });
  return h("span.model-choice", h("label", { for: "chat-model" }, "Model "), select);
}
