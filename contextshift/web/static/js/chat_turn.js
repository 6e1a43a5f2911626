// One turn of the chat, streamed: the reply grows in the history as tokens come, Stop aborts it, and a failure
// ends up on the message it belongs to (or, refused before anything was stored, in a notice above the composer).

import { generate, get } from "./api.js";
import { badge, h, replace } from "./dom.js";
import { errorWords } from "./words.js";
import { markdown } from "./markdown.js";
import { isCommand } from "./chat_composer.js";

/** Codes whose server message carries useful numbers (shown after the plain words). */
function withDetail(code) {
  return code === "TOKEN_BUDGET_EXCEEDED";
}

function noticeEl(kind, title, text, code, openPrompt) {
  return h(
    `div.notice-msg.${kind}`,
    { role: kind === "error" ? "alert" : "status" },
    h("strong", title),
    code ? [" ", h("code", code)] : null,
    text ? h("p", text) : null,
    kind === "error" ? h("button.link.small", { type: "button", onclick: openPrompt }, "Open the prompt view") : null,
  );
}

function streamingReply(input, command) {
  const text = h("div.text.md");
  const caret = h("span.caret", { "aria-hidden": "true" });
  const el = h(
    "article.msg.role-assistant.pending.streaming#streaming-reply",
    { "aria-busy": "true", "aria-label": "Assistant reply, streaming" },
    h("header.msg-head", h("span.role", command ? "contextshift" : "Assistant"), badge(input.continue_of ? "continuing…" : "streaming…", "info")),
    h("div.msg-body", text, caret),
  );
  return { el, text };
}

/** Stream the reply; what ended it: {ok, payload} | {ok: false, error} | {stopped}. */
async function streamTurn({ st, chat, historyEl }, input, controller, paint) {
  let outcome = null;
  let painted = false;
  const token = (t) => {
    if (!st.streaming) return;
    st.streaming.text += t;
    if (!painted) {
      painted = true;
      requestAnimationFrame(() => ((painted = false), paint())); // markdown once a frame, however fast tokens come
    }
    const nearBottom = historyEl.scrollHeight - historyEl.scrollTop - historyEl.clientHeight < 160;
    if (nearBottom) historyEl.scrollTop = historyEl.scrollHeight;
  };
  try {
    await generate(
      chat.id,
      input,
      { token, done: (payload) => (outcome = { ok: true, payload }), error: (payload) => (outcome = { ok: false, error: payload }) },
      { signal: controller.signal },
    );
  } catch (error) {
    if (error.name === "AbortError") outcome = { stopped: true };
    else outcome = { ok: false, error: { code: error.code, message: error.message, params: error.params, status: error.status } };
  }
  return outcome;
}

/**
 * The turn runner of a chat view. st: its state (streaming, notice, disposed); composer: chat_composer.js;
 * historyEl: the scrolling history; view: {renderHistory, refreshAll, later, historyView, openPrompt, store}.
 */
export function turnRunner({ st, chat, composer, historyEl, view }) {
  /** A stop, or a turn refused before anything was stored, gets a notice; every other failure is on its message. */
  function noticeOf(outcome, input, streamed) {
    if (outcome?.stopped) {
      return noticeEl("info", "Stopped.", streamed ? "What came is kept, marked partial: continue or regenerate it." : "No reply was stored.", null);
    }
    if (!outcome || outcome.ok !== false) return null;
    const { code, message, partial, input_message_id: kept } = outcome.error || {};
    const stored = partial || kept || input.regenerate_of || input.continue_of || input.retry_of;
    if (stored) return null;
    if (typeof input === "string") composer.restore(input);
    const words = `${errorWords(code, message)}${message && withDetail(code) ? ` (${message})` : ""}`;
    return noticeEl("error", "The reply failed.", words, code, view.openPrompt);
  }

  // The first user message titles an untitled chat (server side): show the new title here and in the list.
  async function refreshTitle() {
    try {
      const fresh = (await get(`/chats/${chat.id}`)).chat;
      if (fresh.title && !st.disposed) view.store.updateChat(fresh);
    } catch {
      /* the old title stays; the next load shows the new one */
    }
  }

  /**
   * One turn: new input (a string), or {retry_of}, {regenerate_of} or {continue_of}. While it streams, the reply
   * being redone is replaced by the streaming one; user: the pending input shown meanwhile; prefix: the text a
   * continued reply starts with.
   */
  async function run(input, { user = null, replaces = null, prefix = "" } = {}) {
    if (st.streaming) return;
    st.notice = null;
    const controller = new AbortController();
    const reply = streamingReply(input, typeof input === "string" && isCommand(input));
    st.streaming = { controller, text: prefix, el: reply.el, user, replaces: replaces?.id || null };
    const paint = () => st.streaming && replace(reply.text, markdown(st.streaming.text));
    if (prefix) paint();
    composer.setBusy(true);
    view.renderHistory();
    const outcome = await streamTurn({ st, chat, historyEl }, input, controller, paint);
    const streamed = (st.streaming?.text || "").length > prefix.length;
    st.streaming = null;
    composer.setBusy(false);
    st.notice = noticeOf(outcome, input, streamed);
    if (outcome?.stopped) view.later(() => view.refreshAll(), 350);
    await view.refreshAll();
    if (!chat.title) await refreshTitle();
    // A background compaction may follow a turn: look again a little later.
    view.later(() => view.refreshAll(), 2500);
    // Back to where the user was: the redone reply, or the composer.
    const active = document.activeElement;
    const target = replaces?.id || null;
    if (target && document.getElementById(`msg-${target}`)) view.historyView().focus({ id: target, action: "regenerate" });
    else if (!active || active === document.body || composer.form.contains(active) || historyEl.contains(active)) composer.focus();
  }

  return { run, stop: () => st.streaming?.controller.abort() };
}
