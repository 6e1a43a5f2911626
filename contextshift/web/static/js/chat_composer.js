// The chat's composer: the message box (its draft kept per chat), the slash-command hint, the live context meter,
// and the Send and Stop buttons. Its own state: the draft; the chat view says what sending and stopping do.

import { h } from "./dom.js";
import { contextMeter } from "./meter.js";

const COMMANDS = [
  ["/compact", "fold old history into a summary now"],
  ["/compact run", "the same"],
  ["/status", "show the session status here"],
];

export const draftKey = (id) => `contextshift.draft.${id}`;

export function isCommand(text) {
  return /^\/(compact(\s+run)?|status)\s*$/i.test(text.trim());
}

/**
 * chatId: the chat (its draft); onSend(text): a message to send; onStop(): stop the streaming reply;
 * onInput(): the draft changed; onOpenMeter(): the meter was clicked; streaming(): whether a reply streams.
 */
export function chatComposer({ chatId, onSend, onStop, onInput, onOpenMeter, streaming }) {
  const input = h("textarea#composer", {
    rows: 3,
    placeholder: "Write a message…  (/compact, /status)",
    "aria-describedby": "composer-hint",
    maxlength: 2000000,
  });
  const sendButton = h("button.primary#send", { type: "submit" }, "Send");
  const stopButton = h("button.danger#stop", { type: "button", hidden: true, onclick: () => onStop() }, "Stop");
  const meter = contextMeter({ onOpen: onOpenMeter });
  const commandHint = h(
    "ul.command-hint",
    { hidden: true, "aria-label": "Slash commands" },
    COMMANDS.map(([c, d]) => h("li", h("code", c), ` — ${d}`)),
  );
  const form = h(
    "form.composer",
    { "aria-label": "Send a message", onsubmit: (event) => (event.preventDefault(), send()) },
    h("label.visually-hidden", { for: "composer" }, "Message"),
    commandHint,
    input,
    h("div.composer-row", meter.el, h("div.composer-buttons", stopButton, sendButton)),
    h("p.hint#composer-hint", "Enter sends, Shift+Enter adds a line. Commands: /compact, /compact run, /status."),
  );

  function send() {
    const content = input.value.trim();
    if (!content || streaming()) return;
    input.value = "";
    localStorage.removeItem(draftKey(chatId));
    commandHint.hidden = true;
    onSend(content);
  }

  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    } else if (event.key === "Escape" && streaming()) {
      event.preventDefault();
      onStop();
    }
  });
  input.addEventListener("input", () => {
    localStorage.setItem(draftKey(chatId), input.value);
    commandHint.hidden = !input.value.startsWith("/") || input.value.includes("\n");
    onInput();
  });
  input.value = localStorage.getItem(draftKey(chatId)) || "";

  return {
    form,
    input,
    meter,
    get value() {
      return input.value;
    },
    /** Put back a message that was refused before anything was stored (when the box is empty). */
    restore(text) {
      if (input.value) return;
      input.value = text;
      localStorage.setItem(draftKey(chatId), text);
    },
    renderMeter(preview, error) {
      meter.render(preview, error, { command: isCommand(input.value) });
    },
    setBusy(busy) {
      sendButton.disabled = busy;
      stopButton.hidden = !busy;
      stopButton.disabled = !busy;
      form.setAttribute("aria-busy", String(busy));
    },
    focus: () => input.focus(),
  };
}
