// The chat view: history with per-message actions and context marks, the composer with its live context meter,
// streaming replies with a stop button, and the side panel (session status, prompt view).

import { del, generate, get, optional, patch, post } from "./api.js";
import { badge, debounce, h, replace, tabs, toast, typingOutside } from "./dom.js";
import { chatTitle, modelLabel } from "./store.js";
import { errorWords } from "./words.js";
import { promptView, renderStatus } from "./inspector.js";
import { memoriesEditor } from "./memories.js";
import { chatHistory } from "./history.js";
import { contextMeter } from "./meter.js";
import { plainText } from "./message.js";
import { markdown } from "./markdown.js";
import { exportMenu } from "./transfer.js";
import { onShowMessage } from "./jump.js";

const PREVIEW_DELAY = 400;
const COMMANDS = [
  ["/compact", "fold old history into a summary now"],
  ["/compact run", "the same"],
  ["/status", "show the session status here"],
];
const draftKey = (id) => `contextshift.draft.${id}`;

function isCommand(text) {
  return /^\/(compact(\s+run)?|status)\s*$/i.test(text.trim());
}

export async function chatView(main, [chatId], { store, go }) {
  const { chat } = await get(`/chats/${encodeURIComponent(chatId)}`);
  const { bot } = await get(`/bots/${chat.bot_id}`);
  let model = bot.chat_model_id ? store.model(bot.chat_model_id) : null;
  if (bot.chat_model_id && !model) model = (await get(`/models/${bot.chat_model_id}`).catch(() => null))?.model || null;
  const st = {
    chat,
    bot,
    model,
    messages: [],
    hasMore: false,
    audit: null,
    preview: null,
    previewError: null,
    previewDraft: null,
    summaries: [],
    summariesSupported: true,
    streaming: null,
    notice: null,
    disposed: false,
    promptMode: "audit",
  };
  const timers = new Set();
  const later = (fn, ms) => {
    const t = setTimeout(() => {
      timers.delete(t);
      if (!st.disposed) fn();
    }, ms);
    timers.add(t);
  };

  // -- layout ----------------------------------------------------------------------------------------------
  const history = h("div.history", { role: "log", "aria-label": "Messages", "aria-live": "off", tabindex: 0 });
  const composer = h("textarea#composer", {
    rows: 3,
    placeholder: "Write a message…  (/compact, /status)",
    "aria-describedby": "composer-hint",
    maxlength: 2000000,
  });
  const sendButton = h("button.primary#send", { type: "submit" }, "Send");
  const stopButton = h("button.danger#stop", { type: "button", hidden: true, onclick: () => stop() }, "Stop");
  const meter = contextMeter({ onOpen: () => openInspector("prompt", "preview") });
  const commandHint = h("ul.command-hint", { hidden: true, "aria-label": "Slash commands" }, COMMANDS.map(([c, d]) => h("li", h("code", c), ` — ${d}`)));
  const form = h(
    "form.composer",
    { "aria-label": "Send a message", onsubmit: (event) => (event.preventDefault(), send()) },
    h("label.visually-hidden", { for: "composer" }, "Message"),
    commandHint,
    composer,
    h(
      "div.composer-row",
      meter.el,
      h("div.composer-buttons", stopButton, sendButton),
    ),
    h("p.hint#composer-hint", "Enter sends, Shift+Enter adds a line. Commands: /compact, /compact run, /status."),
  );

  const statusPanel = h("div.status-panel");
  const promptPanel = h("div.prompt-panel");
  const memoriesPanel = h("div.memories-panel");
  let memories = null;
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
            onChange: () => refreshAll({ audit: false }),
          });
        },
      },
    ],
    { label: "Chat details", selected: "status" },
  );
  inspectorTabs.panel("status").append(statusPanel);
  inspectorTabs.panel("prompt").append(promptPanel);
  inspectorTabs.panel("memories").append(memoriesPanel);
  const inspector = h(
    "aside.inspector#inspector",
    { "aria-label": "Session status, prompt view and memories" },
    h("div.inspector-head", h("h2.visually-hidden", "Details"), h("button.icon.close-inspector", { type: "button", "aria-label": "Close the panel", onclick: () => closeInspector() }, "×")),
    inspectorTabs.el,
  );
  inspector.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && view.classList.contains("inspector-open")) {
      event.preventDefault();
      closeInspector();
    }
  });

  const titleEl = h("h1.chat-heading", chatTitle(chat));
  document.title = `${chatTitle(chat)} · contextshift`;
  const head = h(
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
        model ? h("span", modelLabel(model)) : h("span.warn-text", "no chat model (preview only)"),
      ),
    ),
    h(
      "div.chat-head-actions",
      h("button.small", { type: "button", onclick: () => openInspector("status") }, "Status"),
      h("button.small", { type: "button", onclick: () => openInspector("prompt", st.audit ? "audit" : "preview") }, "Prompt"),
      h("button.small", { type: "button", onclick: () => openInspector("memories") }, "Memories"),
      exportMenu(chat),
      h(
        "button.small.danger-outline",
        { type: "button", "aria-label": "Delete chat", onclick: () => deleteChat() },
        h("span.wide-only", "Delete chat"),
        h("span.narrow-only", { "aria-hidden": "true" }, "Delete"),
      ),
    ),
  );
  const view = h(
    "section.chat-view",
    { dataset: { chatId: chat.id } },
    head,
    h("div.chat-columns", h("div.chat-column", history, form), inspector),
  );
  replace(main, view);

  function openInspector(tab, mode) {
    if (mode) st.promptMode = mode;
    view.classList.add("inspector-open");
    inspectorTabs.select(tab);
    if (tab === "prompt") renderPrompt();
    inspector.querySelector('[role="tab"][aria-selected="true"]')?.focus();
  }
  function closeInspector() {
    view.classList.remove("inspector-open");
    composer.focus();
  }

  // -- data ------------------------------------------------------------------------------------------------
  async function loadMessages() {
    const page = await get(`/chats/${chat.id}/messages?limit=200`);
    st.messages = page.messages;
    st.hasMore = page.has_more;
  }
  async function loadOlder() {
    const first = st.messages[0];
    if (!first) return;
    const page = await get(`/chats/${chat.id}/messages?limit=200&before_seq=${first.seq}`);
    st.messages = [...page.messages, ...st.messages];
    st.hasMore = page.has_more;
    renderHistory({ keepScroll: true, prepended: true });
  }
  async function loadAudit() {
    st.audit = (await get(`/chats/${chat.id}/context-audit`)).audit;
  }
  async function loadSummaries() {
    if (!st.summariesSupported) return;
    try {
      const data = await optional(`/chats/${chat.id}/summaries`);
      if (data === null) {
        st.summariesSupported = false;
        st.summaries = [];
      } else st.summaries = data.summaries || [];
    } catch {
      st.summaries = [];
    }
  }
  let previewSerial = 0;
  let previewAbort = null;
  /** Fetch the next-prompt preview; with render, show it everywhere (meter, history marks, prompt view). */
  async function loadPreview() {
    const draft = composer.value;
    const serial = ++previewSerial;
    previewAbort?.abort();
    previewAbort = new AbortController();
    try {
      const { preview } = await post("/context-preview", { chat_id: chat.id, user_message: draft }, { signal: previewAbort.signal });
      if (serial !== previewSerial || st.disposed) return false;
      st.preview = preview;
      st.previewError = null;
    } catch (error) {
      if (error.name === "AbortError" || serial !== previewSerial || st.disposed) return false;
      st.previewError = error;
    }
    return true;
  }
  async function refreshPreview() {
    if (!(await loadPreview())) return;
    renderMeter();
    renderHistory({ keepScroll: true });
    if (st.promptMode === "preview") renderPrompt();
  }
  const schedulePreview = debounce(refreshPreview, PREVIEW_DELAY);

  /** Reload what a change touched, then render once: marks never show a prompt from before the change. */
  async function refreshAll({ audit = true } = {}) {
    schedulePreview.cancel();
    await Promise.all([loadMessages(), audit ? loadAudit() : null, loadSummaries(), loadPreview()]);
    if (st.disposed) return;
    renderMeter();
    renderHistory({ keepScroll: true });
    if (inspectorTabs.current() === "status") renderStatus(statusPanel, ctx);
    renderPrompt();
  }

  const ctx = {
    chat,
    refreshAll: () => refreshAll(),
    messageById: (id) => st.messages.find((m) => m.id === id) || null,
    focusMessage: (id) => {
      historyView.reveal(id);
      const el = document.getElementById(`msg-${id}`);
      if (!el) return;
      if (window.matchMedia("(max-width: 1099px)").matches) view.classList.remove("inspector-open");
      el.scrollIntoView({ block: "center", behavior: "smooth" });
      el.classList.add("flash");
      el.focus({ preventScroll: true });
      setTimeout(() => el.classList.remove("flash"), 1600);
    },
  };

  // -- rendering ---------------------------------------------------------------------------------------------
  const newest = () => st.messages[st.messages.length - 1] || null;
  const renderHistory = (options) => {
    if (!st.disposed) historyView.render(st, options);
  };
  const renderMeter = () => meter.render(st.preview, st.previewError, { command: isCommand(composer.value) });

  function renderPrompt() {
    if (st.disposed) return;
    const mode = st.promptMode;
    const toggle = h(
      "div.segmented",
      { role: "group", "aria-label": "Which prompt" },
      h("button.small", { type: "button", "aria-pressed": String(mode === "audit"), onclick: () => ((st.promptMode = "audit"), renderPrompt()) }, "Last prompt"),
      h("button.small", { type: "button", "aria-pressed": String(mode === "preview"), onclick: () => ((st.promptMode = "preview"), renderPrompt()) }, "Next prompt (preview)"),
    );
    const data = mode === "audit" ? st.audit : st.preview;
    const errorBox =
      mode === "preview" && st.previewError
        ? h("div.error-box", { role: "alert" }, h("strong", st.previewError.code), h("p", errorWords(st.previewError.code, st.previewError.message)))
        : null;
    replace(promptPanel, toggle, errorBox, promptView(data, mode, ctx));
  }

  // -- actions -----------------------------------------------------------------------------------------------
  async function change(m, body, focus) {
    try {
      await patch(`/chats/${chat.id}/messages/${m.id}`, body);
      historyView.focusNext(focus);
      await refreshAll({ audit: false });
      return true;
    } catch (error) {
      toast(error.message, "error");
      return false;
    }
  }
  const actions = {
    busy: () => Boolean(st.streaming),
    openPrompt: () => openInspector("prompt", "audit"),
    isNewest: (m) => newest()?.id === m.id,
    canRegenerateAfter(m) {
      const last = newest();
      if (!last) return false;
      if (last.id === m.id) return Boolean(m.meta?.failed);
      const at = st.messages.findIndex((x) => x.id === m.id);
      return at === st.messages.length - 2 && last.role === "assistant" && !last.meta?.command;
    },
    pin: (m, pinned) => change(m, { pinned }, { id: m.id, action: "pin" }),
    dismissStanding: (m) => change(m, { standing: false }, { id: m.id, action: "pin" }),
    exclude: (m, excluded) => change(m, { meta: { manualExcluded: excluded ? true : null } }, { id: m.id, action: "exclude" }),
    choose: (m, index) => change(m, { alternative: index }, { id: m.id, action: index > m.alternative ? "next-alternative" : "previous-alternative" }),
    askDelete(m) {
      historyView.state(m.id).confirm = true;
      historyView.focusNext({ id: m.id, action: "keep" });
      renderHistory({ keepScroll: true });
    },
    keep(m) {
      historyView.state(m.id).confirm = false;
      historyView.focusNext({ id: m.id, action: "delete" });
      renderHistory({ keepScroll: true });
    },
    async remove(m) {
      const at = st.messages.findIndex((x) => x.id === m.id);
      const neighbour = st.messages[at + 1] || st.messages[at - 1];
      try {
        await del(`/chats/${chat.id}/messages/${m.id}`);
        historyView.forget(m.id);
        historyView.focusNext(neighbour ? { id: neighbour.id, action: "delete", fallback: composer } : { fallback: composer });
        await refreshAll({ audit: false });
        toast("Message deleted.");
      } catch (error) {
        toast(error.message, "error");
      }
    },
    startEdit(m) {
      Object.assign(historyView.state(m.id), { editing: true, draft: null });
      historyView.focusNext({ id: m.id, selector: ".edit-text" });
      renderHistory({ keepScroll: true });
    },
    cancelEdit(m) {
      Object.assign(historyView.state(m.id), { editing: false, draft: null });
      historyView.focusNext({ id: m.id, action: "edit" });
      renderHistory({ keepScroll: true });
    },
    async edit(m, text, again) {
      if (!text.trim()) {
        toast("A message needs at least one character.", "error");
        return;
      }
      const reply = again && !m.meta?.failed ? newest() : null;
      Object.assign(historyView.state(m.id), { editing: false, draft: null });
      if (!(await change(m, { content: text }, { id: m.id, action: "edit" }))) {
        Object.assign(historyView.state(m.id), { editing: true, draft: text });
        renderHistory({ keepScroll: true });
        return;
      }
      if (again && m.meta?.failed) await runTurn({ retry_of: m.id });
      else if (reply) await runTurn({ regenerate_of: reply.id }, { replaces: reply });
    },
    /** How many loaded messages come after ``m`` (all of the later ones: the newest are always loaded). */
    laterCount(m) {
      const at = st.messages.findIndex((x) => x.id === m.id);
      return at < 0 ? 0 : st.messages.length - at - 1;
    },
    /** Save the edited text, rewind the chat to this message (its later messages are deleted) and answer it. */
    async editFrom(m, text) {
      if (!text.trim()) {
        toast("A message needs at least one character.", "error");
        return;
      }
      Object.assign(historyView.state(m.id), { editing: false, draft: null });
      if (!(await change(m, { content: text }, { id: m.id, action: "edit" }))) {
        Object.assign(historyView.state(m.id), { editing: true, draft: text });
        renderHistory({ keepScroll: true });
        return;
      }
      try {
        await post(`/chats/${encodeURIComponent(chat.id)}/messages/${encodeURIComponent(m.id)}/rewind`, {});
      } catch (error) {
        toast(`Could not remove the later messages: ${error.message}`, "error");
        return;
      }
      const at = st.messages.findIndex((x) => x.id === m.id);
      if (at >= 0) st.messages = st.messages.slice(0, at + 1);
      renderHistory({ keepScroll: true });
      await runTurn({ retry_of: m.id });
    },
    retry: (m) => runTurn({ retry_of: m.id }),
    regenerate: (m) => runTurn({ regenerate_of: m.id }, { replaces: m }),
    continueReply: (m) => runTurn({ continue_of: m.id }, { replaces: m, prefix: typeof m.content === "string" ? m.content : "" }),
    async copy(m) {
      try {
        await navigator.clipboard.writeText(plainText(m));
        toast("Copied.");
      } catch {
        toast("The browser did not allow copying.", "error");
      }
    },
  };
  const historyView = chatHistory({ el: history, actions, loadOlder: () => loadOlder() });

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

  function setBusy(busy) {
    sendButton.disabled = busy;
    stopButton.hidden = !busy;
    stopButton.disabled = !busy;
    form.setAttribute("aria-busy", String(busy));
  }

  function noticeEl(kind, title, text, code) {
    return h(
      `div.notice-msg.${kind}`,
      { role: kind === "error" ? "alert" : "status" },
      h("strong", title),
      code ? [" ", h("code", code)] : null,
      text ? h("p", text) : null,
      kind === "error" ? h("button.link.small", { type: "button", onclick: () => openInspector("prompt", "audit") }, "Open the prompt view") : null,
    );
  }

  async function send() {
    const content = composer.value.trim();
    if (!content || st.streaming) return;
    composer.value = "";
    localStorage.removeItem(draftKey(chat.id));
    commandHint.hidden = true;
    await runTurn(content, { user: { id: "pending", role: "user", content, pending: true, meta: isCommand(content) ? { command: content } : {} } });
  }

  /**
   * One turn, streamed: new input (a string), or {retry_of}, {regenerate_of} or {continue_of}. While it streams,
   * the reply being redone is replaced by the streaming one. Errors end up on the message they belong to (the
   * kept input, the partial reply, the reply a redo failed on: stored, so a reload shows them too); only a
   * turn refused before anything was stored gets a notice here.
   */
  async function runTurn(input, { user = null, replaces = null, prefix = "" } = {}) {
    if (st.streaming) return;
    st.notice = null;
    const controller = new AbortController();
    const text = h("div.text.md");
    const caret = h("span.caret", { "aria-hidden": "true" });
    const command = typeof input === "string" && isCommand(input);
    const replyEl = h(
      "article.msg.role-assistant.pending.streaming#streaming-reply",
      { "aria-busy": "true", "aria-label": "Assistant reply, streaming" },
      h("header.msg-head", h("span.role", command ? "contextshift" : "Assistant"), badge(input.continue_of ? "continuing…" : "streaming…", "info")),
      h("div.msg-body", text, caret),
    );
    st.streaming = { controller, text: prefix, el: replyEl, user, replaces: replaces?.id || null };
    let painted = false;
    const paint = () => {
      painted = false;
      if (st.streaming) replace(text, markdown(st.streaming.text));
    };
    if (prefix) paint();
    setBusy(true);
    renderHistory();
    let outcome = null;
    try {
      await generate(
        chat.id,
        input,
        {
          token: (t) => {
            if (!st.streaming) return;
            st.streaming.text += t;
            if (!painted) {
              painted = true;
              requestAnimationFrame(paint); // markdown once a frame, however fast tokens come
            }
            const nearBottom = history.scrollHeight - history.scrollTop - history.clientHeight < 160;
            if (nearBottom) history.scrollTop = history.scrollHeight;
          },
          done: (payload) => (outcome = { ok: true, payload }),
          error: (payload) => (outcome = { ok: false, error: payload }),
        },
        { signal: controller.signal },
      );
    } catch (error) {
      if (error.name === "AbortError") outcome = { stopped: true };
      else outcome = { ok: false, error: { code: error.code, message: error.message, params: error.params, status: error.status } };
    }
    const streamed = (st.streaming?.text || "").length > prefix.length;
    st.streaming = null;
    setBusy(false);
    if (outcome?.stopped) {
      st.notice = noticeEl("info", "Stopped.", streamed ? "What came is kept, marked partial: continue or regenerate it." : "No reply was stored.", null);
    } else if (outcome && outcome.ok === false) {
      const { code, message, partial, input_message_id: kept } = outcome.error || {};
      // A turn refused before anything was stored says so here; every other failure is on its message.
      const stored = partial || kept || input.regenerate_of || input.continue_of || input.retry_of;
      if (!stored) {
        st.notice = noticeEl("error", "The reply failed.", `${errorWords(code, message)}${message && withDetail(code) ? ` (${message})` : ""}`, code);
        if (typeof input === "string" && !composer.value) {
          composer.value = input;
          localStorage.setItem(draftKey(chat.id), input);
        }
      }
    }
    if (outcome?.stopped) later(() => refreshAll(), 350);
    const target = replaces?.id || null;
    await refreshAll();
    if (!chat.title) await refreshTitle();
    // A background compaction may follow a turn: look again a little later.
    later(() => refreshAll(), 2500);
    // Back to where the user was: the redone reply, or the composer.
    const active = document.activeElement;
    if (target && document.getElementById(`msg-${target}`)) historyView.focus({ id: target, action: "regenerate" });
    else if (!active || active === document.body || form.contains(active) || history.contains(active)) composer.focus();
  }

  // The first user message titles an untitled chat (server side): show the new title here and in the list.
  async function refreshTitle() {
    try {
      const fresh = (await get(`/chats/${chat.id}`)).chat;
      if (fresh.title && !st.disposed) store.updateChat(fresh);
    } catch {
      /* the old title stays; the next load shows the new one */
    }
  }
  const unwatch = store.onChange(() => {
    const known = store.chat(chat.id);
    if (!known || known.title === chat.title) return;
    chat.title = known.title;
    titleEl.textContent = chatTitle(chat);
    document.title = `${chatTitle(chat)} · contextshift`;
  });

  function stop() {
    st.streaming?.controller.abort();
  }

  // -- composer events ---------------------------------------------------------------------------------------
  composer.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    } else if (event.key === "Escape" && st.streaming) {
      event.preventDefault();
      stop();
    }
  });
  composer.addEventListener("input", () => {
    localStorage.setItem(draftKey(chat.id), composer.value);
    commandHint.hidden = !composer.value.startsWith("/") || composer.value.includes("\n");
    schedulePreview();
  });

  // -- first load --------------------------------------------------------------------------------------------
  composer.value = localStorage.getItem(draftKey(chat.id)) || "";
  await Promise.all([loadMessages(), loadAudit(), loadSummaries(), loadPreview()]);
  st.promptMode = st.audit ? "audit" : "preview";
  renderMeter();
  renderHistory();
  renderPrompt();
  const found = store.pendingFocus;
  store.pendingFocus = null;
  if (found?.chatId === chat.id && ctx.messageById(found.messageId)) ctx.focusMessage(found.messageId);
  else if (!typingOutside(main)) composer.focus(); // not when the user went on to rename the chat in the sidebar
  const unjump = onShowMessage(chat.id, (id) => ctx.messageById(id) && ctx.focusMessage(id)); // a search hit

  return () => {
    st.disposed = true;
    unwatch();
    unjump();
    schedulePreview.cancel();
    previewAbort?.abort();
    st.streaming?.controller.abort();
    timers.forEach(clearTimeout);
  };
}

/** Codes whose server message carries useful numbers (shown after the plain words). */
function withDetail(code) {
  return code === "TOKEN_BUDGET_EXCEEDED";
}
