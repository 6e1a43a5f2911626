// The chat's side panel: session status, the prompt view (last prompt or the next one, previewed) and memories.
// Its own state: which prompt it shows (st.promptMode, shared with the header's Prompt button) and whether it is
// open (a class on the chat view).

import { h, replace, tabs } from "./dom.js";
import { errorWords } from "./words.js";
import { promptView, renderStatus } from "./inspector.js";
import { memoriesEditor } from "./memories.js";

/** The prompt panel: which prompt (last, or next as previewed), its error, and the prompt view (inspector.js). */
function showPrompt(st, promptPanel, ctx, again) {
  if (st.disposed) return;
  const mode = st.promptMode;
  const pick = (next) => () => ((st.promptMode = next), again());
  const toggle = h(
    "div.segmented",
    { role: "group", "aria-label": "Which prompt" },
    h("button.small", { type: "button", "aria-pressed": String(mode === "audit"), onclick: pick("audit") }, "Last prompt"),
    h("button.small", { type: "button", "aria-pressed": String(mode === "preview"), onclick: pick("preview") }, "Next prompt (preview)"),
  );
  const data = mode === "audit" ? st.audit : st.preview;
  const failed = mode === "preview" ? st.previewError : null;
  const errorBox = failed
    ? h("div.error-box", { role: "alert" }, h("strong", failed.code), h("p", errorWords(failed.code, failed.message)))
    : null;
  replace(promptPanel, toggle, errorBox, promptView(data, mode, ctx));
}

/**
 * st: the chat view's state (audit, preview, previewError, promptMode, disposed); ctx: what the panels may ask
 * of the chat (inspector.js); onMemoryChange(): a memory changed; onClose(): the panel was closed.
 */
export function chatInspector({ st, ctx, bot, chat, store, onMemoryChange, onClose }) {
  const statusPanel = h("div.status-panel");
  const promptPanel = h("div.prompt-panel");
  const memoriesPanel = h("div.memories-panel");
  let memories = null;
  let view = null;
  const inspectorTabs = tabs(
    [
      { id: "status", label: "Session status", render: () => renderStatus(statusPanel, ctx) },
      { id: "prompt", label: "Prompt view", render: () => renderPrompt() },
      {
        id: "memories",
        label: "Memories",
        render: () => {
          // a change to a memory shows at once in the next-prompt preview (and the meter)
          memories ||= memoriesEditor(memoriesPanel, {
            bot,
            chat,
            chats: store.chats.filter((c) => c.bot_id === bot.id),
            heading: "h3",
            onChange: onMemoryChange,
          });
        },
      },
    ],
    { label: "Chat details", selected: "status" },
  );
  inspectorTabs.panel("status").append(statusPanel);
  inspectorTabs.panel("prompt").append(promptPanel);
  inspectorTabs.panel("memories").append(memoriesPanel);
  const el = h(
    "aside.inspector#inspector",
    { "aria-label": "Session status, prompt view and memories" },
    h(
      "div.inspector-head",
      h("h2.visually-hidden", "Details"),
      h("button.icon.close-inspector", { type: "button", "aria-label": "Close the panel", onclick: () => close() }, "×"),
    ),
    inspectorTabs.el,
  );
  el.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && view?.classList.contains("inspector-open")) {
      event.preventDefault();
      close();
    }
  });

  function open(tab, mode) {
    if (mode) st.promptMode = mode;
    view?.classList.add("inspector-open");
    inspectorTabs.select(tab);
    if (tab === "prompt") renderPrompt();
    el.querySelector('[role="tab"][aria-selected="true"]')?.focus();
  }
  function close() {
    view?.classList.remove("inspector-open");
    onClose();
  }

  const renderPrompt = () => showPrompt(st, promptPanel, ctx, renderPrompt);

  return {
    el,
    /** The chat view whose class says the panel is open (on narrow screens it covers the history). */
    attach: (chatView) => (view = chatView),
    open,
    close,
    renderPrompt,
    /** After a change: the status panel again when it is the one shown. */
    renderStatus: () => inspectorTabs.current() === "status" && renderStatus(statusPanel, ctx),
  };
}
