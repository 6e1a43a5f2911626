// The chat's history: messages with their marks in the next prompt, stored summaries where they stand, long runs
// of summarized messages collapsed, the streaming reply. Its own state: each message's small state (editing,
// confirming a delete), which summarized runs are open, and where focus goes after the next render (focus stays
// on the control used, or goes where an action says, never to <body>).

import { badge, h, replace, shorten } from "./dom.js";
import { marksOf, summarizedRuns } from "./marks.js";
import { messageEl } from "./message.js";

function summaryCard(summary) {
  const covered = summary.covers || [];
  return h(
    "div.summary-card",
    { dataset: { summaryId: summary.id }, role: "note", "aria-label": `Summary of ${covered.length} messages` },
    h("div.summary-head", badge("summary", "sum"), ` stands for ${covered.length} message${covered.length === 1 ? "" : "s"} (greyed out below; pinned ones are sent raw)`),
    h("details", h("summary", shorten(summary.content, 160)), h("p.pre", summary.content)),
  );
}

/** Where focus is inside the history, to put it back on the same control after a re-render. */
function focusedControl(el) {
  const active = document.activeElement;
  if (!active || !el.contains(active)) return null;
  const article = active.closest("article.msg");
  if (active.dataset.action) {
    if (active.dataset.run) return { selector: `[data-action="toggle-run"][data-run="${CSS.escape(active.dataset.run)}"]` };
    if (article) return { id: article.dataset.messageId, action: active.dataset.action };
  }
  if (active.classList.contains("edit-text") && article) return { id: article.dataset.messageId, selector: ".edit-text" };
  if (article) return { id: article.dataset.messageId };
  return null;
}

/** Focus {id?, action?, selector?, fallback?}: a control of a message, the message, or the fallback element. */
function focusIn(el, target) {
  if (!target) return;
  let found = null;
  const scope = target.id ? document.getElementById(`msg-${target.id}`) : el;
  if (scope && target.action) found = scope.querySelector(`[data-action="${target.action}"]`);
  if (!found && scope && target.selector) found = scope.querySelector(target.selector);
  if (!found && scope && target.id) found = scope;
  if (!found && target.fallback) found = target.fallback;
  found?.focus({ preventScroll: true });
}

/** The history's nodes: older-page button, summaries where they stand, folded runs, messages, the streaming reply. */
function historyNodes(data, { expanded, stateOf, actions, loadOlder, runToggle }) {
  const { messages, streaming } = data;
  const { marks, boundary } = marksOf(data.preview, messages);
  const runs = summarizedRuns(messages, marks);
  const hidden = new Set();
  const nodes = [];
  if (data.hasMore) nodes.push(h("div.older", h("button.small", { type: "button", onclick: () => loadOlder() }, "Load older messages")));
  if (!messages.length && !streaming)
    nodes.push(
      h(
        "div.empty-chat",
        h("p", "No messages yet. Say hello below."),
        data.model ? null : h("p.muted", "This bot has no chat model: the meter and prompt preview work, but sending needs a model: choose one in the Model picker above, or set one in the bot's settings."),
      ),
    );
  const summaryAt = new Map();
  for (const summary of data.summaries) {
    const first = messages.find((m) => (summary.covers || []).includes(m.id));
    if (first) summaryAt.set(first.id, [...(summaryAt.get(first.id) || []), summary]);
  }
  for (const m of messages) {
    for (const summary of summaryAt.get(m.id) || []) nodes.push(summaryCard(summary));
    const run = runs.get(m.id);
    if (run) {
      const open = expanded.has(m.id);
      nodes.push(runToggle(run, open));
      if (!open) run.forEach((id) => hidden.add(id));
    }
    if (hidden.has(m.id) || m.id === streaming?.replaces) continue;
    if (boundary === m.id)
      nodes.push(h("div.boundary", { role: "separator", "aria-label": "Start of the next prompt" }, h("span", "▼ The next prompt would start here (preview)")));
    nodes.push(messageEl(m, { mark: marks.get(m.id), kind: "preview", ui: stateOf(m.id), act: actions }));
  }
  if (streaming) {
    if (streaming.user) nodes.push(messageEl(streaming.user, { mark: null, kind: "preview", ui: {}, act: actions }));
    nodes.push(streaming.el);
  }
  if (data.notice) nodes.push(data.notice);
  return nodes;
}

/**
 * The history component. el: its container; actions: what a message's buttons do (message.js); loadOlder: reads
 * the previous page. render(data) takes {messages, preview, summaries, hasMore, streaming, notice, model}.
 */
export function chatHistory({ el, actions, loadOlder }) {
  const ui = new Map(); // per message id: {editing, confirm, draft}
  const expanded = new Set(); // open summarized runs, by their first message id
  let focusAfter = null;
  let data = { messages: [], preview: null, summaries: [], hasMore: false, streaming: null, notice: null, model: null };

  const stateOf = (id) => {
    if (!ui.has(id)) ui.set(id, { editing: false, confirm: false, draft: null });
    return ui.get(id);
  };

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
            if (open) expanded.delete(ids[0]);
            else expanded.add(ids[0]);
            focusAfter = { selector: `[data-action="toggle-run"][data-run="${CSS.escape(ids[0])}"]` };
            render(data, { keepScroll: true });
          },
        },
        open ? `Hide ${ids.length} summarized messages` : `Show ${ids.length} summarized messages`,
      ),
    );
  }

  function render(next, { keepScroll = false, prepended = false } = {}) {
    data = next;
    const target = focusAfter || focusedControl(el);
    focusAfter = null;
    const atBottom = el.scrollHeight - el.scrollTop - el.clientHeight < 80;
    const previousHeight = el.scrollHeight;
    const previousTop = el.scrollTop;
    const nodes = historyNodes(data, { expanded, stateOf, actions, loadOlder, runToggle });
    replace(el, nodes);
    if (keepScroll) el.scrollTop = previousTop + (prepended ? el.scrollHeight - previousHeight : 0);
    if (!keepScroll || atBottom) el.scrollTop = el.scrollHeight;
    focusIn(el, target);
  }

  return {
    render,
    focus: (target) => focusIn(el, target),
    /** Where focus goes after the next render. */
    focusNext: (target) => (focusAfter = target),
    /** A message's small state ({editing, confirm, draft}); forget(id) drops it. */
    state: stateOf,
    forget: (id) => ui.delete(id),
    /** Open the summarized run that holds message `id` (e.g. to show it from the prompt view). */
    reveal(id) {
      const run = [...summarizedRuns(data.messages, marksOf(data.preview, data.messages).marks).values()].find((ids) => ids.includes(id));
      if (!run || expanded.has(run[0])) return false;
      expanded.add(run[0]);
      render(data, { keepScroll: true });
      return true;
    },
  };
}
