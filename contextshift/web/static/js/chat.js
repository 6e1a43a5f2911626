// The chat view: history with per-message actions and context marks, the composer with its live context meter,
// streaming replies with a stop button, and the side panel (session status, prompt view).

import { del, generate, get, optional, patch, post } from "./api.js";
import { badge, debounce, h, num, replace, shorten, tabs, toast } from "./dom.js";
import { chatTitle, modelLabel } from "./store.js";
import { errorWords } from "./words.js";
import { promptView, renderStatus } from "./inspector.js";
import { marksOf, promptCounts, summarizedRuns } from "./marks.js";
import { messageEl, plainText } from "./message.js";
import { markdown } from "./markdown.js";

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
    ui: new Map(), // per message: {editing, confirm, draft}
    expanded: new Set(), // summarized runs shown in full, by their first message id
    focusAfter: null, // where focus goes after the next history render
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
  const meterFill = h("div.bar-fill");
  const meterBar = h("div.bar.low#context-meter", { role: "meter", "aria-label": "Context used by the next prompt", "aria-valuemin": 0 }, meterFill);
  const meterText = h("span.meter-text", "…");
  const meterFacts = h("span.meter-facts");
  const meterBox = h(
    "div.meter-box",
    { "aria-live": "off" },
    h("div.bar-wrap", meterBar),
    h("div.meter-line", meterText, meterFacts, h("button.link.small", { type: "button", onclick: () => openInspector("prompt", "preview") }, "Next prompt")),
  );
  const commandHint = h("ul.command-hint", { hidden: true, "aria-label": "Slash commands" }, COMMANDS.map(([c, d]) => h("li", h("code", c), ` — ${d}`)));
  const form = h(
    "form.composer",
    { "aria-label": "Send a message", onsubmit: (event) => (event.preventDefault(), send()) },
    h("label.visually-hidden", { for: "composer" }, "Message"),
    commandHint,
    composer,
    h(
      "div.composer-row",
      meterBox,
      h("div.composer-buttons", stopButton, sendButton),
    ),
    h("p.hint#composer-hint", "Enter sends, Shift+Enter adds a line. Commands: /compact, /compact run, /status."),
  );

  const statusPanel = h("div.status-panel");
  const promptPanel = h("div.prompt-panel");
  const inspectorTabs = tabs(
    [
      { id: "status", label: "Session status", render: () => renderStatus(statusPanel, ctx) },
      { id: "prompt", label: "Prompt view", render: () => renderPrompt() },
    ],
    { label: "Chat details", selected: "status" },
  );
  inspectorTabs.panel("status").append(statusPanel);
  inspectorTabs.panel("prompt").append(promptPanel);
  const inspector = h(
    "aside.inspector#inspector",
    { "aria-label": "Session status and prompt view" },
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
      const run = [...summarizedRuns(st.messages, marksOf(st.preview, st.messages).marks).values()].find((ids) => ids.includes(id));
      if (run && !st.expanded.has(run[0])) {
        st.expanded.add(run[0]);
        renderHistory({ keepScroll: true });
      }
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
  const uiOf = (id) => {
    if (!st.ui.has(id)) st.ui.set(id, { editing: false, confirm: false, draft: null });
    return st.ui.get(id);
  };
  const newest = () => st.messages[st.messages.length - 1] || null;

  function summaryCard(summary) {
    const covered = summary.covers || [];
    return h(
      "div.summary-card",
      { dataset: { summaryId: summary.id }, role: "note", "aria-label": `Summary of ${covered.length} messages` },
      h("div.summary-head", badge("summary", "sum"), ` stands for ${covered.length} message${covered.length === 1 ? "" : "s"} (greyed out below, pinned ones are sent raw)`),
      h("details", h("summary", shorten(summary.content, 160)), h("p.pre", summary.content)),
    );
  }

  function runToggle(ids, open) {
    return h(
      "div.summarized-run",
      h(
        "button.small.link",
        {
          type: "button",
          "aria-expanded": String(open),
          dataset: { action: "toggle-run", run: ids[0] },
          onclick: () => {
            if (open) st.expanded.delete(ids[0]);
            else st.expanded.add(ids[0]);
            st.focusAfter = { selector: `[data-action="toggle-run"][data-run="${CSS.escape(ids[0])}"]` };
            renderHistory({ keepScroll: true });
          },
        },
        open ? `Hide ${ids.length} summarized messages` : `Show ${ids.length} summarized messages`,
      ),
    );
  }

  /** Where focus was inside the history, to put it back on the same control after a re-render. */
  function focusedControl() {
    const active = document.activeElement;
    if (!active || !history.contains(active)) return null;
    const article = active.closest("article.msg");
    if (active.dataset.action) {
      if (active.dataset.run) return { selector: `[data-action="toggle-run"][data-run="${CSS.escape(active.dataset.run)}"]` };
      if (article) return { id: article.dataset.messageId, action: active.dataset.action };
    }
    if (active.classList.contains("edit-text") && article) return { id: article.dataset.messageId, selector: ".edit-text" };
    if (article) return { id: article.dataset.messageId };
    return null;
  }
  function restoreFocus(target) {
    if (!target) return;
    let el = null;
    const scope = target.id ? document.getElementById(`msg-${target.id}`) : history;
    if (scope && target.action) el = scope.querySelector(`[data-action="${target.action}"]`);
    if (!el && scope && target.selector) el = scope.querySelector(target.selector);
    if (!el && scope && target.id) el = scope;
    if (!el && target.fallback) el = target.fallback;
    el?.focus({ preventScroll: true });
  }

  function renderHistory({ keepScroll = false, prepended = false } = {}) {
    if (st.disposed) return;
    const focusTarget = st.focusAfter || focusedControl();
    st.focusAfter = null;
    const atBottom = history.scrollHeight - history.scrollTop - history.clientHeight < 80;
    const previousHeight = history.scrollHeight;
    const previousTop = history.scrollTop;
    const { marks, boundary } = marksOf(st.preview, st.messages);
    const runs = summarizedRuns(st.messages, marks);
    const hidden = new Set();
    const nodes = [];
    if (st.hasMore) nodes.push(h("div.older", h("button.small", { type: "button", onclick: () => loadOlder() }, "Load older messages")));
    if (!st.messages.length && !st.streaming)
      nodes.push(
        h(
          "div.empty-chat",
          h("p", "No messages yet. Say hello below."),
          st.model ? null : h("p.muted", "This bot has no chat model: the meter and prompt preview work, but sending needs a model. Set one in the bot's settings."),
        ),
      );
    const summaryAt = new Map();
    for (const summary of st.summaries) {
      const first = st.messages.find((m) => (summary.covers || []).includes(m.id));
      if (first) summaryAt.set(first.id, [...(summaryAt.get(first.id) || []), summary]);
    }
    const replaced = st.streaming?.replaces;
    for (const m of st.messages) {
      for (const summary of summaryAt.get(m.id) || []) nodes.push(summaryCard(summary));
      const run = runs.get(m.id);
      if (run) {
        const open = st.expanded.has(m.id);
        nodes.push(runToggle(run, open));
        if (!open) run.forEach((id) => hidden.add(id));
      }
      if (hidden.has(m.id) || m.id === replaced) continue;
      if (boundary === m.id) {
        nodes.push(h("div.boundary", { role: "separator", "aria-label": "Start of the next prompt" }, h("span", "▼ The next prompt would start here (preview)")));
      }
      nodes.push(messageEl(m, { mark: marks.get(m.id), kind: "preview", ui: uiOf(m.id), act: actions }));
    }
    if (st.streaming) {
      if (st.streaming.user) nodes.push(messageEl(st.streaming.user, { mark: null, kind: "preview", ui: {}, act: actions }));
      nodes.push(st.streaming.el);
    }
    if (st.notice) nodes.push(st.notice);
    replace(history, nodes);
    if (keepScroll) history.scrollTop = previousTop + (prepended ? history.scrollHeight - previousHeight : 0);
    if (!keepScroll || atBottom) history.scrollTop = history.scrollHeight;
    restoreFocus(focusTarget);
  }

  function renderMeter() {
    const p = st.preview;
    const error = st.previewError;
    if (error) {
      meterBar.className = "bar high";
      meterFill.style.width = "100%";
      if (error.code === "TOKEN_BUDGET_EXCEEDED") {
        const params = error.params || {};
        meterText.textContent = `Over budget: ${num(params.prompt_tokens)} protected tokens, budget ${num(params.budget ?? params.context_limit - params.response_reserve)}`;
      } else meterText.textContent = `Preview unavailable: ${error.message}`;
      meterFacts.textContent = "";
      return;
    }
    if (!p) return;
    const budget = p.budget.context_limit - p.budget.response_reserve;
    const used = p.budget.prompt_tokens;
    const ratio = budget > 0 ? Math.min(1, used / budget) : 1;
    meterBar.className = `bar ${ratio >= 0.95 ? "high" : ratio >= 0.8 ? "mid" : "low"}`;
    meterFill.style.width = `${(ratio * 100).toFixed(1)}%`;
    meterBar.setAttribute("aria-valuemax", String(Math.max(budget, 0)));
    meterBar.setAttribute("aria-valuenow", String(used));
    const counts = promptCounts(p);
    const approx = p.tokenizer.approximate;
    meterBar.setAttribute("aria-valuetext", `${num(used)} of ${num(budget)} tokens${approx ? " (approximate)" : ""}, ${counts.leftOut} left out, ${counts.summarized} summarized`);
    replace(
      meterText,
      h("strong.meter-used", num(used)),
      ` / ${num(budget)} tokens`,
      approx ? [" ", approxBadge(p)] : [" ", badge(p.tokenizer.profile, "ok", { title: "Exact tokenizer" })],
    );
    replace(
      meterFacts,
      h("span.meter-excluded", { dataset: { count: counts.leftOut } }, `${counts.leftOut} left out`),
      " · ",
      h("span.meter-summarized", { dataset: { count: counts.summarized } }, `${counts.summarized} summarized`),
      isCommand(composer.value) ? [" · ", h("span.muted", "command: answered by contextshift")] : null,
    );
  }

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
      st.focusAfter = focus;
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
    exclude: (m, excluded) => change(m, { meta: { manualExcluded: excluded ? true : null } }, { id: m.id, action: "exclude" }),
    choose: (m, index) => change(m, { alternative: index }, { id: m.id, action: index > m.alternative ? "next-alternative" : "previous-alternative" }),
    askDelete(m) {
      uiOf(m.id).confirm = true;
      st.focusAfter = { id: m.id, action: "keep" };
      renderHistory({ keepScroll: true });
    },
    keep(m) {
      uiOf(m.id).confirm = false;
      st.focusAfter = { id: m.id, action: "delete" };
      renderHistory({ keepScroll: true });
    },
    async remove(m) {
      const at = st.messages.findIndex((x) => x.id === m.id);
      const neighbour = st.messages[at + 1] || st.messages[at - 1];
      try {
        await del(`/chats/${chat.id}/messages/${m.id}`);
        st.ui.delete(m.id);
        st.focusAfter = neighbour ? { id: neighbour.id, action: "delete", fallback: composer } : { fallback: composer };
        await refreshAll({ audit: false });
        toast("Message deleted.");
      } catch (error) {
        toast(error.message, "error");
      }
    },
    startEdit(m) {
      Object.assign(uiOf(m.id), { editing: true, draft: null });
      st.focusAfter = { id: m.id, selector: ".edit-text" };
      renderHistory({ keepScroll: true });
    },
    cancelEdit(m) {
      Object.assign(uiOf(m.id), { editing: false, draft: null });
      st.focusAfter = { id: m.id, action: "edit" };
      renderHistory({ keepScroll: true });
    },
    async edit(m, text, again) {
      if (!text.trim()) {
        toast("A message needs at least one character.", "error");
        return;
      }
      const reply = again && !m.meta?.failed ? newest() : null;
      Object.assign(uiOf(m.id), { editing: false, draft: null });
      if (!(await change(m, { content: text }, { id: m.id, action: "edit" }))) {
        Object.assign(uiOf(m.id), { editing: true, draft: text });
        renderHistory({ keepScroll: true });
        return;
      }
      if (again && m.meta?.failed) await runTurn({ retry_of: m.id });
      else if (reply) await runTurn({ regenerate_of: reply.id }, { replaces: reply });
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
    if (target && document.getElementById(`msg-${target}`)) restoreFocus({ id: target, action: "regenerate" });
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
  composer.focus();

  return () => {
    st.disposed = true;
    unwatch();
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

/** The meter's badge for an approximate count: "≈ calibrated" once the provider's usage corrects it (T5). */
function approxBadge(p) {
  const c = p.calibration;
  if (c && c.applied && c.calls > 0) {
    return badge("≈ calibrated", "ok", { title: `${c.label}; margin ${(c.margin * 100).toFixed(1)}%`, dataset: { factor: c.factor } });
  }
  return badge("≈ approximate", "warn", { title: `Tokenizer ${p.tokenizer.profile} is an estimate (not calibrated yet)` });
}
