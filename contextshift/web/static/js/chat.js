// The chat view: history with per-message actions and context marks, the composer with its live context meter,
// streaming replies with a stop button, and the side panel (session status, prompt view).

import { del, generate, get, optional, patch, post } from "./api.js";
import { badge, debounce, h, num, replace, shorten, tabs, toast } from "./dom.js";
import { chatTitle, modelLabel } from "./store.js";
import { errorWords, REASON_WORDS } from "./words.js";
import { promptView, renderStatus } from "./inspector.js";

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

function roleName(m) {
  if (m.meta?.command && m.role === "assistant") return "contextshift";
  return { user: "You", assistant: "Assistant", system: "System", tool: "Tool" }[m.role] || m.role;
}

/** Text and parts of a message, as DOM nodes (no HTML is ever interpreted). */
function contentNodes(m) {
  const nodes = [];
  const content = m.content;
  if (typeof content === "string") {
    if (content) nodes.push(h("div.text", content));
  } else if (Array.isArray(content)) {
    for (const part of content) {
      const type = part?.type;
      if (type === "text") nodes.push(h("div.text", part.text || ""));
      else if (type === "image" || type === "image_url") nodes.push(h("div.part", "[image]"));
      else if (type === "file" || type === "document") nodes.push(h("div.part", "[file]"));
      else if (type === "tool_use")
        nodes.push(h("div.tool-call", h("span.tool-label", "calls "), h("code", `${part.name}(${shorten(JSON.stringify(part.input ?? {}), 300)})`)));
      else if (type === "tool_result") {
        const inner = Array.isArray(part.content) ? part.content.map((p) => p.text || "").join("\n") : String(part.content ?? "");
        nodes.push(h("div.tool-result", h("span.tool-label", "tool result: "), h("code", shorten(inner, 600))));
      } else nodes.push(h("div.part", `[${type || "part"}]`));
    }
  }
  for (const call of m.tool_calls || []) {
    const fn = call.function || call;
    nodes.push(
      h("div.tool-call", h("span.tool-label", "calls "), h("code", `${fn.name}(${shorten(fn.arguments ?? "", 300)})`)),
    );
  }
  if (m.role === "tool") {
    nodes.unshift(h("div.tool-label", `result of ${m.tool_call_id || "a tool call"}`));
  }
  if (!nodes.length) nodes.push(h("div.text.muted", "(empty)"));
  return nodes;
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
    confirmDelete: null,
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
  async function refreshPreview() {
    const draft = composer.value;
    const serial = ++previewSerial;
    previewAbort?.abort();
    previewAbort = new AbortController();
    try {
      const { preview } = await post("/context-preview", { chat_id: chat.id, user_message: draft }, { signal: previewAbort.signal });
      if (serial !== previewSerial || st.disposed) return;
      st.preview = preview;
      st.previewError = null;
      st.previewDraft = draft;
    } catch (error) {
      if (error.name === "AbortError" || serial !== previewSerial || st.disposed) return;
      st.previewError = error;
    }
    renderMeter();
    if (!st.audit || !hasMatches(st.audit)) renderHistory({ keepScroll: true });
    if (st.promptMode === "preview") renderPrompt();
  }
  const schedulePreview = debounce(refreshPreview, PREVIEW_DELAY);

  async function refreshAll({ preview = true } = {}) {
    await Promise.all([loadMessages(), loadAudit(), loadSummaries()]);
    if (st.disposed) return;
    renderHistory();
    if (preview) await refreshPreview();
    if (inspectorTabs.current() === "status") renderStatus(statusPanel, ctx);
    renderPrompt();
  }

  const ctx = {
    chat,
    refreshAll: () => refreshAll(),
    messageById: (id) => st.messages.find((m) => m.id === id) || null,
    focusMessage: (id) => {
      const el = document.getElementById(`msg-${id}`);
      if (!el) return;
      if (window.matchMedia("(max-width: 1099px)").matches) view.classList.remove("inspector-open");
      el.scrollIntoView({ block: "center", behavior: "smooth" });
      el.classList.add("flash");
      el.focus({ preventScroll: true });
      setTimeout(() => el.classList.remove("flash"), 1600);
    },
  };

  // -- marks: what was (or would be) in the prompt ----------------------------------------------------------
  function hasMatches(data) {
    const ids = new Set(st.messages.map((m) => m.id));
    return (data?.entries || []).some((e) => ids.has(e.identifier));
  }

  function computeMarks() {
    const data = st.audit && hasMatches(st.audit) ? st.audit : st.preview && hasMatches(st.preview) ? st.preview : null;
    const kind = data === st.audit ? "audit" : "preview";
    const marks = new Map();
    const recalled = new Set();
    if (!data) return { marks, recalled, kind: null, boundary: null, tokens: new Map() };
    const seqOf = new Map(st.messages.map((m) => [m.id, m.seq]));
    const tokens = new Map();
    let newest = -Infinity;
    let boundary = null;
    let boundarySeq = Infinity;
    for (const entry of data.entries) {
      const seq = seqOf.get(entry.identifier);
      if (seq === undefined) continue;
      tokens.set(entry.identifier, entry.tokens);
      newest = Math.max(newest, seq);
      if (entry.included && entry.reason === "recalled") recalled.add(entry.identifier);
      else if (entry.included) {
        if (seq < boundarySeq) {
          boundarySeq = seq;
          boundary = entry.identifier;
        }
      } else marks.set(entry.identifier, entry.reason);
    }
    // A message the prompt has no block for, older than its newest block, was not even loaded: the recent
    // window that any shift could keep ends before it (it is out of context because of the shift).
    for (const m of st.messages) {
      if (!tokens.has(m.id) && m.seq < newest && !marks.has(m.id)) marks.set(m.id, "context-shift");
    }
    return { marks, recalled, kind, boundary, tokens, newest };
  }

  // -- rendering ---------------------------------------------------------------------------------------------
  function messageActions(m) {
    if (m.pending) return null;
    const excluded = m.meta?.manualExcluded === true;
    if (st.confirmDelete === m.id) {
      return h(
        "div.msg-actions.confirm",
        h("span", "Delete this message?"),
        h("button.small.danger", { type: "button", onclick: () => deleteMessage(m) }, "Delete"),
        h("button.small", { type: "button", onclick: () => ((st.confirmDelete = null), renderHistory({ keepScroll: true })) }, "Keep"),
      );
    }
    return h(
      "div.msg-actions",
      h(
        "button.small.pin",
        { type: "button", "aria-pressed": String(m.pinned), title: m.pinned ? "Unpin: may be dropped again when the context is full" : "Pin: always keep in the prompt", onclick: () => setPinned(m, !m.pinned) },
        m.pinned ? "Unpin" : "Pin",
      ),
      h(
        "button.small.exclude",
        { type: "button", "aria-pressed": String(excluded), title: excluded ? "Include in the prompt again" : "Leave out of the prompt", onclick: () => setExcluded(m, !excluded) },
        excluded ? "Include" : "Exclude",
      ),
      h("button.small.delete", { type: "button", onclick: () => ((st.confirmDelete = m.id), renderHistory({ keepScroll: true })) }, "Delete"),
    );
  }

  function messageEl(m, info) {
    const reason = info.marks.get(m.id);
    const excludedByUser = m.meta?.manualExcluded === true;
    const summarized = Boolean(m.summarized_by);
    const out = Boolean(reason) || summarized;
    const badges = [];
    if (m.meta?.command) badges.push(badge("command", "info"));
    if (m.pinned) badges.push(badge("pinned", "pin"));
    if (excludedByUser) badges.push(badge("excluded by you", "warn"));
    // N5: a reply cut off mid-stream is kept with what came; a failed input is kept but not sent.
    if (m.meta?.partial) {
      const why = m.meta.partial_reason === "cancelled" ? "stopped" : "cut off";
      badges.push(badge(`partial: ${why}`, "warn", { title: "Only what was streamed before the reply ended" }));
    }
    if (m.meta?.failed) {
      const title = `The turn failed (${m.meta.failed.code}); left out of prompts until retried`;
      badges.push(badge("failed: not sent", "warn", { title }));
    }
    const recalled = info.recalled?.has(m.id);
    if (summarized) badges.push(badge("summarized", "sum", { title: "Folded into a summary: hidden from prompts, not deleted" }));
    else if (recalled) badges.push(badge(info.kind === "preview" ? "recalled into next prompt" : "recalled", "ok", { title: REASON_WORDS.recalled }));
    else if (reason && !(reason === "manual" && excludedByUser)) {
      const label = info.kind === "preview" ? "not in next prompt" : "not in context";
      badges.push(badge(`${label}: ${reason}`, "out", { title: REASON_WORDS[reason] || reason }));
    }
    const tokens = info.tokens.get(m.id);
    return h(
      "article",
      {
        class: `msg role-${m.role}${out ? " out" : ""}${summarized ? " summarized" : ""}${recalled ? " recalled" : ""}${m.pinned ? " pinned" : ""}${m.pending ? " pending" : ""}${m.meta?.command ? " command" : ""}`,
        id: `msg-${m.id}`,
        tabindex: -1,
        dataset: { messageId: m.id, seq: m.seq ?? "", reason: summarized ? "summarized" : recalled ? "recalled" : reason || "" },
        "aria-label": `${roleName(m)}, message ${m.seq ?? ""}${reason ? `, not in context (${reason})` : ""}`,
      },
      h(
        "header.msg-head",
        h("span.role", roleName(m)),
        m.name ? h("span.muted", ` ${m.name}`) : null,
        m.seq != null ? h("span.seq", `#${m.seq}`) : null,
        tokens != null ? h("span.tokens", `${num(tokens)} tok`) : null,
        badges,
      ),
      h("div.msg-body", contentNodes(m)),
      messageActions(m),
    );
  }

  function summaryCard(summary) {
    const covered = summary.covers || [];
    return h(
      "div.summary-card",
      { dataset: { summaryId: summary.id }, role: "note", "aria-label": `Summary of ${covered.length} messages` },
      h("div.summary-head", badge("summary", "sum"), ` stands for ${covered.length} message${covered.length === 1 ? "" : "s"} below (greyed out)`),
      h("details", h("summary", shorten(summary.content, 160)), h("p.pre", summary.content)),
    );
  }

  function renderHistory({ keepScroll = false, prepended = false } = {}) {
    if (st.disposed) return;
    const atBottom = history.scrollHeight - history.scrollTop - history.clientHeight < 80;
    const previousHeight = history.scrollHeight;
    const previousTop = history.scrollTop;
    const info = computeMarks();
    const nodes = [];
    if (st.hasMore)
      nodes.push(h("div.older", h("button.small", { type: "button", onclick: () => loadOlder() }, "Load older messages")));
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
    for (const m of st.messages) {
      for (const summary of summaryAt.get(m.id) || []) nodes.push(summaryCard(summary));
      if (info.boundary === m.id) {
        const older = st.messages.some((x) => x.seq < m.seq);
        nodes.push(
          h(
            "div.boundary",
            { role: "separator", "aria-label": "Start of the prompt" },
            h(
              "span",
              info.kind === "audit"
                ? older
                  ? "▼ The last prompt sent to the model starts here — older messages were not sent"
                  : "▼ The last prompt sent to the model starts here"
                : "▼ The next prompt would start here (preview)",
            ),
          ),
        );
      }
      nodes.push(messageEl(m, info));
      if (info.kind === "audit" && m.seq === info.newest && st.messages.some((x) => x.seq > m.seq))
        nodes.push(h("div.boundary.end", { role: "separator", "aria-label": "End of the last prompt" }, h("span", "▲ End of the last prompt")));
    }
    if (st.streaming) {
      nodes.push(messageEl(st.streaming.user, info));
      nodes.push(st.streaming.el);
    }
    if (st.notice) nodes.push(st.notice);
    replace(history, nodes);
    if (keepScroll) history.scrollTop = previousTop + (prepended ? history.scrollHeight - previousHeight : 0);
    if (!keepScroll || atBottom) history.scrollTop = history.scrollHeight;
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
    const folded = new Set(p.entries.filter((e) => e.reason === "summarized").map((e) => e.identifier));
    for (const e of p.entries) if (e.source === "summary") (e.stands_for || []).forEach((id) => folded.add(id));
    const summarized = folded.size;
    const ids = new Set(p.entries.map((e) => e.identifier));
    const seqs = st.messages.filter((m) => ids.has(m.id)).map((m) => m.seq);
    const newest = seqs.length ? Math.max(...seqs) : -Infinity;
    const outside = st.messages.filter((m) => !ids.has(m.id) && m.seq < newest && !m.summarized_by).length;
    const excluded = p.excluded_count + outside;
    const approx = p.tokenizer.approximate;
    meterBar.setAttribute("aria-valuetext", `${num(used)} of ${num(budget)} tokens${approx ? " (approximate)" : ""}, ${excluded} excluded, ${summarized} summarized`);
    replace(
      meterText,
      h("strong.meter-used", num(used)),
      ` / ${num(budget)} tokens`,
      approx ? [" ", approxBadge(p)] : [" ", badge(p.tokenizer.profile, "ok", { title: "Exact tokenizer" })],
    );
    replace(
      meterFacts,
      h("span.meter-excluded", { dataset: { count: excluded } }, `${excluded} excluded`),
      " · ",
      h("span.meter-summarized", { dataset: { count: summarized } }, `${summarized} summarized`),
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
  async function setPinned(m, pinned) {
    try {
      await patch(`/chats/${chat.id}/messages/${m.id}`, { pinned });
      await afterEdit(m.id);
    } catch (error) {
      toast(error.message, "error");
    }
  }
  async function setExcluded(m, excluded) {
    try {
      await patch(`/chats/${chat.id}/messages/${m.id}`, { meta: { manualExcluded: excluded ? true : null } });
      await afterEdit(m.id);
    } catch (error) {
      toast(error.message, "error");
    }
  }
  async function deleteMessage(m) {
    st.confirmDelete = null;
    try {
      await del(`/chats/${chat.id}/messages/${m.id}`);
      await afterEdit(null);
      toast("Message deleted.");
    } catch (error) {
      toast(error.message, "error");
    }
  }
  async function afterEdit(focusId) {
    await Promise.all([loadMessages(), loadSummaries()]);
    renderHistory({ keepScroll: true });
    if (focusId) document.querySelector(`#msg-${CSS.escape(focusId)} .msg-actions button`)?.focus();
    await refreshPreview();
  }
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
    st.notice = null;
    composer.value = "";
    localStorage.removeItem(draftKey(chat.id));
    commandHint.hidden = true;
    const controller = new AbortController();
    const text = h("div.text", "");
    const caret = h("span.caret", { "aria-hidden": "true" });
    const replyEl = h(
      "article.msg.role-assistant.pending.streaming#streaming-reply",
      { "aria-busy": "true", "aria-label": "Assistant reply, streaming" },
      h("header.msg-head", h("span.role", isCommand(content) ? "contextshift" : "Assistant"), badge("streaming…", "info")),
      h("div.msg-body", text, caret),
    );
    st.streaming = { controller, text: "", el: replyEl, user: { id: "pending", role: "user", content, pending: true, meta: isCommand(content) ? { command: content } : {} } };
    setBusy(true);
    renderHistory();
    let outcome = null;
    try {
      await generate(
        chat.id,
        content,
        {
          token: (t) => {
            if (!st.streaming) return;
            st.streaming.text += t;
            text.textContent = st.streaming.text;
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
    const partial = st.streaming?.text || "";
    st.streaming = null;
    setBusy(false);
    if (outcome?.stopped) {
      st.notice = noticeEl("info", "Stopped.", partial ? "The partial reply was not kept." : "No reply was stored.", null);
    } else if (outcome && outcome.ok === false) {
      const { code, message } = outcome.error || {};
      st.notice = noticeEl("error", "The reply failed.", `${errorWords(code, message)}${message && withDetail(code) ? ` (${message})` : ""}`, code);
      // Rejected before anything was stored: give the text back.
      const rejectedBeforeStart = code === "TOKEN_BUDGET_EXCEEDED" || (outcome.error.status >= 400 && outcome.error.status < 500);
      if (rejectedBeforeStart && !composer.value) {
        composer.value = content;
        localStorage.setItem(draftKey(chat.id), content);
      }
    }
    if (outcome?.stopped) later(() => refreshAll(), 350);
    await refreshAll();
    if (!chat.title) await refreshTitle();
    // A background compaction may follow a turn: look again a little later.
    later(async () => {
      await Promise.all([loadMessages(), loadSummaries()]);
      renderHistory({ keepScroll: true });
      if (inspectorTabs.current() === "status") renderStatus(statusPanel, ctx);
    }, 2500);
    // Back to the composer, unless the user has moved on to something else meanwhile.
    const active = document.activeElement;
    if (!active || active === document.body || form.contains(active)) composer.focus();
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
  await Promise.all([loadMessages(), loadAudit(), loadSummaries()]);
  st.promptMode = st.audit ? "audit" : "preview";
  renderHistory();
  refreshPreview();
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
