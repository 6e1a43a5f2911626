// What the buttons of a message do (message.js draws them): pin, exclude, versions, delete, edit, retry,
// regenerate, continue, copy. Each change is stored, then the chat reloads what it touched.

import { del, patch, post } from "./api.js";
import { toast } from "./dom.js";
import { plainText } from "./message.js";

/** What the action groups share: the history view, the newest message, storing a change and re-rendering. */
function actionKit({ st, chat, view }) {
  const kit = {
    hv: () => view.historyView(),
    newest: () => st.messages[st.messages.length - 1] || null,
    indexOf: (m) => st.messages.findIndex((x) => x.id === m.id),
    rerender: () => view.renderHistory({ keepScroll: true }),
    async change(m, body, focus) {
      try {
        await patch(`/chats/${chat.id}/messages/${m.id}`, body);
        kit.hv().focusNext(focus);
        await view.refreshAll({ audit: false });
        return true;
      } catch (error) {
        toast(error.message, "error");
        return false;
      }
    },
    setEditing(m, editing, draft = null) {
      Object.assign(kit.hv().state(m.id), { editing, draft });
    },
    /** Save an edit's text; on a refusal the edit stays open with the text typed. */
    async saveText(m, text) {
      if (!text.trim()) {
        toast("A message needs at least one character.", "error");
        return false;
      }
      kit.setEditing(m, false);
      if (await kit.change(m, { content: text }, { id: m.id, action: "edit" })) return true;
      kit.setEditing(m, true, text);
      kit.rerender();
      return false;
    },
  };
  return kit;
}

/** Edit a message: in place, with a regenerate of the newest reply, or as a new branch of an older message. */
function editActions({ st, chat, turn }, kit) {
  const { hv, newest, indexOf, rerender, setEditing, saveText } = kit;
  return {
    startEdit(m) {
      setEditing(m, true);
      hv().focusNext({ id: m.id, selector: ".edit-text" });
      rerender();
    },
    cancelEdit(m) {
      setEditing(m, false);
      hv().focusNext({ id: m.id, action: "edit" });
      rerender();
    },
    async edit(m, text, again) {
      const reply = again && !m.meta?.failed ? newest() : null;
      if (!(await saveText(m, text))) return;
      if (again && m.meta?.failed) await turn.run({ retry_of: m.id });
      else if (reply) await turn.run({ regenerate_of: reply.id }, { replaces: reply });
    },
    /** How many loaded messages come after ``m`` (all of the later ones: the newest are always loaded). */
    laterCount(m) {
      const at = indexOf(m);
      return at < 0 ? 0 : st.messages.length - at - 1;
    },
    /** Make the edited text a new version of the message (a new branch: the later messages stay with the
     * version shown until now) and answer it. */
    async branchFrom(m, text) {
      if (!text.trim()) {
        toast("A message needs at least one character.", "error");
        return;
      }
      setEditing(m, false);
      try {
        await post(`/chats/${encodeURIComponent(chat.id)}/messages/${encodeURIComponent(m.id)}/branch`, { content: text });
      } catch (error) {
        setEditing(m, true, text);
        rerender();
        toast(error.message, "error");
        return;
      }
      const at = indexOf(m);
      if (at >= 0) st.messages = [...st.messages.slice(0, at), { ...m, content: text, alternatives: (m.alternatives || 1) + 1, alternative: m.alternatives || 1, branch_point: true }];
      rerender();
      await turn.run({ retry_of: m.id });
    },
  };
}

/** Delete a message, after a confirmation in place. */
function deleteActions({ st, chat, view }, kit) {
  const { hv, indexOf, rerender } = kit;
  return {
    askDelete(m) {
      hv().state(m.id).confirm = true;
      hv().focusNext({ id: m.id, action: "keep" });
      rerender();
    },
    keep(m) {
      hv().state(m.id).confirm = false;
      hv().focusNext({ id: m.id, action: "delete" });
      rerender();
    },
    async remove(m) {
      const at = indexOf(m);
      const neighbour = st.messages[at + 1] || st.messages[at - 1];
      const fallback = view.composer.input;
      try {
        await del(`/chats/${chat.id}/messages/${m.id}`);
        hv().forget(m.id);
        hv().focusNext(neighbour ? { id: neighbour.id, action: "delete", fallback } : { fallback });
        await view.refreshAll({ audit: false });
        toast("Message deleted.");
      } catch (error) {
        toast(error.message, "error");
      }
    },
  };
}

/**
 * st: the chat view's state (messages, streaming); view: {historyView(), refreshAll, renderHistory, openPrompt,
 * composer}; turn: the turn runner (chat_turn.js).
 */
export function messageActions({ st, chat, view, turn }) {
  const kit = actionKit({ st, chat, view });
  const { newest, indexOf, change } = kit;
  return {
    busy: () => Boolean(st.streaming),
    openPrompt: () => view.openPrompt(),
    isNewest: (m) => newest()?.id === m.id,
    canRegenerateAfter(m) {
      const last = newest();
      if (!last) return false;
      if (last.id === m.id) return Boolean(m.meta?.failed);
      return indexOf(m) === st.messages.length - 2 && last.role === "assistant" && !last.meta?.command;
    },
    pin: (m, pinned) => change(m, { pinned }, { id: m.id, action: "pin" }),
    dismissStanding: (m) => change(m, { standing: false }, { id: m.id, action: "pin" }),
    exclude: (m, excluded) => change(m, { meta: { manualExcluded: excluded ? true : null } }, { id: m.id, action: "exclude" }),
    choose: (m, index) => change(m, { alternative: index }, { id: m.id, action: index > m.alternative ? "next-alternative" : "previous-alternative" }),
    ...editActions({ st, chat, turn }, kit),
    ...deleteActions({ st, chat, view }, kit),
    retry: (m) => turn.run({ retry_of: m.id }),
    regenerate: (m) => turn.run({ regenerate_of: m.id }, { replaces: m }),
    continueReply: (m) => turn.run({ continue_of: m.id }, { replaces: m, prefix: typeof m.content === "string" ? m.content : "" }),
    async copy(m) {
      try {
        await navigator.clipboard.writeText(plainText(m));
        toast("Copied.");
      } catch {
        toast("The browser did not allow copying.", "error");
      }
    },
  };
}
