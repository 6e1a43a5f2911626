// The chat view: the header, the history with per-message actions and context marks, the composer with its live
// context meter, streaming replies with a stop button, and the side panel (session status, prompt view). Each
// part is its own component (chat_head.js, history.js, chat_composer.js, chat_turn.js, chat_actions.js,
// chat_inspector.js); this file holds what they share (the chat's data) and loads it.

import { get, optional, post } from "./api.js";
import { debounce, h, replace, typingOutside } from "./dom.js";
import { chatHistory } from "./history.js";
import { chatComposer, isCommand } from "./chat_composer.js";
import { chatHead } from "./chat_head.js";
import { chatInspector } from "./chat_inspector.js";
import { messageActions } from "./chat_actions.js";
import { turnRunner } from "./chat_turn.js";
import { onShowMessage } from "./jump.js";

const PREVIEW_DELAY = 400;

async function chatModel(store, modelId) {
  if (!modelId) return null;
  const known = store.model(modelId);
  if (known) return known;
  return (await get(`/models/${modelId}`).catch(() => null))?.model || null;
}

/** The chat's data: messages (a page of them), the last prompt's audit, the next prompt's preview, summaries. */
function chatData(st, chat, draft) {
  let previewSerial = 0;
  let previewAbort = null;
  return {
    async messages() {
      const page = await get(`/chats/${chat.id}/messages?limit=200`);
      st.messages = page.messages;
      st.hasMore = page.has_more;
    },
    async older() {
      const first = st.messages[0];
      if (!first) return false;
      const page = await get(`/chats/${chat.id}/messages?limit=200&before_seq=${first.seq}`);
      st.messages = [...page.messages, ...st.messages];
      st.hasMore = page.has_more;
      return true;
    },
    async audit() {
      st.audit = (await get(`/chats/${chat.id}/context-audit`)).audit;
    },
    async summaries() {
      if (!st.summariesSupported) return;
      try {
        const data = await optional(`/chats/${chat.id}/summaries`);
        if (data === null) st.summariesSupported = false;
        st.summaries = data?.summaries || [];
      } catch {
        st.summaries = [];
      }
    },
    /** Fetch the next-prompt preview of the draft; false when a newer request overtook this one. */
    async preview() {
      const serial = ++previewSerial;
      previewAbort?.abort();
      previewAbort = new AbortController();
      try {
        const body = { chat_id: chat.id, user_message: draft() };
        const { preview } = await post("/context-preview", body, { signal: previewAbort.signal });
        if (serial !== previewSerial || st.disposed) return false;
        st.preview = preview;
        st.previewError = null;
      } catch (error) {
        if (error.name === "AbortError" || serial !== previewSerial || st.disposed) return false;
        st.previewError = error;
      }
      return true;
    },
    abort: () => previewAbort?.abort(),
  };
}

function newState(chat, bot, model) {
  return {
    chat,
    bot,
    model,
    messages: [],
    hasMore: false,
    audit: null,
    preview: null,
    previewError: null,
    summaries: [],
    summariesSupported: true,
    streaming: null,
    notice: null,
    disposed: false,
    promptMode: "audit",
  };
}

/** Rendering and reloading, shared by the parts (p: the chat view's parts, filled in by chatView). */
function renderer(st, p) {
  const renderHistory = (options) => {
    if (!st.disposed) p.historyView.render(st, options);
  };
  const renderMeter = () => p.composer.renderMeter(st.preview, st.previewError);
  async function refreshPreview() {
    if (!(await p.data.preview())) return;
    renderMeter();
    renderHistory({ keepScroll: true });
    if (st.promptMode === "preview") p.inspector.renderPrompt();
  }
  const schedulePreview = debounce(refreshPreview, PREVIEW_DELAY);
  /** Reload what a change touched, then render once: marks never show a prompt from before the change. */
  async function refreshAll({ audit = true } = {}) {
    schedulePreview.cancel();
    await Promise.all([p.data.messages(), audit ? p.data.audit() : null, p.data.summaries(), p.data.preview()]);
    if (st.disposed) return;
    renderMeter();
    renderHistory({ keepScroll: true });
    p.inspector.renderStatus();
    p.inspector.renderPrompt();
  }
  function focusMessage(id) {
    p.historyView.reveal(id);
    const el = document.getElementById(`msg-${id}`);
    if (!el) return;
    if (window.matchMedia("(max-width: 1099px)").matches) p.view.classList.remove("inspector-open");
    el.scrollIntoView({ block: "center", behavior: "smooth" });
    el.classList.add("flash");
    el.focus({ preventScroll: true });
    setTimeout(() => el.classList.remove("flash"), 1600);
  }
  return { renderHistory, renderMeter, schedulePreview, refreshAll, focusMessage };
}

/** The header, side panel and composer around the history (p gets them; r: the renderer). */
function frame(st, p, r, { store, go }) {
  const { chat, bot } = st;
  p.composer = chatComposer({
    chatId: chat.id,
    onSend: (content) => {
      const meta = isCommand(content) ? { command: content } : {};
      p.turn.run(content, { user: { id: "pending", role: "user", content, pending: true, meta } });
    },
    onStop: () => p.turn.stop(),
    onInput: () => r.schedulePreview(),
    onOpenMeter: () => p.inspector.open("prompt", "preview"),
    streaming: () => Boolean(st.streaming),
  });
  p.data = chatData(st, chat, () => p.composer.value);
  p.ctx = {
    chat,
    refreshAll: () => r.refreshAll(),
    messageById: (id) => st.messages.find((m) => m.id === id) || null,
    focusMessage: (id) => r.focusMessage(id),
  };
  p.inspector = chatInspector({
    ...{ st, ctx: p.ctx, bot, chat, store },
    onMemoryChange: () => r.refreshAll({ audit: false }),
    onClose: () => p.composer.focus(),
  });
  const onOpen = (tab, mode) => p.inspector.open(tab, mode);
  const promptMode = () => (st.audit ? "audit" : "preview");
  const onModel = async (model) => ((st.model = model), await r.refreshAll({ audit: false }));
  p.head = chatHead({ chat, bot, botModel: st.botModel, store, go, onOpen, promptMode, onModel });
  p.history = h("div.history", { role: "log", "aria-label": "Messages", "aria-live": "off", tabindex: 0 });
  const columns = h("div.chat-columns", h("div.chat-column", p.history, p.composer.form), p.inspector.el);
  p.view = h("section.chat-view", { dataset: { chatId: chat.id } }, p.head.el, columns);
  p.inspector.attach(p.view);
}

export async function chatView(main, [chatId], { store, go }) {
  const { chat } = await get(`/chats/${encodeURIComponent(chatId)}`);
  const { bot } = await get(`/bots/${chat.bot_id}`);
  const botModel = await chatModel(store, bot.chat_model_id);
  const st = { ...newState(chat, bot, chat.model_id ? await chatModel(store, chat.model_id) : botModel), botModel };
  const timers = new Set();
  const later = (fn, ms) => {
    const t = setTimeout(() => (timers.delete(t), st.disposed || fn()), ms);
    timers.add(t);
  };
  const p = {};
  const r = renderer(st, p);
  frame(st, p, r, { store, go });
  replace(main, p.view);
  const shared = {
    ...{ renderHistory: r.renderHistory, refreshAll: r.refreshAll, later, store, composer: p.composer },
    openPrompt: () => p.inspector.open("prompt", "audit"),
    historyView: () => p.historyView,
  };
  p.turn = turnRunner({ st, chat, composer: p.composer, historyEl: p.history, view: shared });
  const actions = messageActions({ st, chat, view: shared, turn: p.turn });
  const loadOlder = async () => (await p.data.older()) && r.renderHistory({ keepScroll: true, prepended: true });
  p.historyView = chatHistory({ el: p.history, actions, loadOlder });

  await Promise.all([p.data.messages(), p.data.audit(), p.data.summaries(), p.data.preview()]);
  st.promptMode = st.audit ? "audit" : "preview";
  r.renderMeter();
  r.renderHistory();
  p.inspector.renderPrompt();
  const found = store.pendingFocus;
  store.pendingFocus = null;
  if (found?.chatId === chat.id && p.ctx.messageById(found.messageId)) r.focusMessage(found.messageId);
  else if (!typingOutside(main)) p.composer.focus(); // not when the user went on to rename the chat in the sidebar

  const unjump = onShowMessage(chat.id, (id) => p.ctx.messageById(id) && r.focusMessage(id)); // a search hit

  return () => {
    st.disposed = true;
    unjump();
    p.head.dispose();
    r.schedulePreview.cancel();
    p.data.abort();
    st.streaming?.controller.abort();
    timers.forEach(clearTimeout);
  };
}
