// One message of the chat history: its marks (from the one prompt marks.js reads), its text (markdown), its
// error, and its actions. Its small state (editing, confirming a delete) lives in `ui`, which the history keeps
// per message id across re-renders.

import { badge, h, num, shorten } from "./dom.js";
import { markdown } from "./markdown.js";
import { errorWords, REASON_WORDS, STATUS } from "./words.js";
import { actionButton, editForm } from "./message_edit.js";
import { versionSwitcher } from "./versions.js";

export function roleName(m) {
  if (m.meta?.command && m.role === "assistant") return "contextshift";
  return { user: "You", assistant: "Assistant", system: "System", tool: "Tool" }[m.role] || m.role;
}

/** The text of a message for the clipboard: its text parts, and tool calls as name(arguments). */
export function plainText(m) {
  const out = [];
  if (typeof m.content === "string") out.push(m.content);
  else if (Array.isArray(m.content)) for (const part of m.content) if (part?.type === "text") out.push(part.text || "");
  for (const call of m.tool_calls || []) {
    const fn = call.function || call;
    out.push(`${fn.name}(${fn.arguments ?? ""})`);
  }
  return out.join("\n");
}

/** A text block: markdown for conversation, plain text for commands and tool output. */
function textBlock(text, asMarkdown) {
  if (!asMarkdown) return h("div.text", text);
  const el = h("div.text.md");
  el.append(markdown(text));
  return el;
}

/** Text and parts of a message as DOM nodes (markdown is sanitized; no HTML of the message is ever run). */
export function contentNodes(m) {
  const nodes = [];
  const content = m.content;
  const rich = !m.meta?.command && m.role !== "tool";
  if (typeof content === "string") {
    if (content) nodes.push(textBlock(content, rich));
  } else if (Array.isArray(content)) {
    for (const part of content) {
      const type = part?.type;
      if (type === "text") nodes.push(textBlock(part.text || "", rich));
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
    nodes.push(h("div.tool-call", h("span.tool-label", "calls "), h("code", `${fn.name}(${shorten(fn.arguments ?? "", 300)})`)));
  }
  if (m.role === "tool") nodes.unshift(h("div.tool-label", `result of ${m.tool_call_id || "a tool call"}`));
  if (!nodes.length) nodes.push(h("div.text.muted", "(empty)"));
  return nodes;
}

/** The words a screen reader hears for a message's place in the prompt (never a stale reason: see marks.js). */
function markWords(mark, kind) {
  const prompt = kind === "audit" ? "the last prompt" : "the next prompt";
  switch (mark?.state) {
    case "in":
      if (mark.reason === "standing") return `in ${prompt} as a standing instruction`;
      return mark.reason === "recalled" ? `recalled into ${prompt}` : `in ${prompt}`;
    case "out":
      return `not in ${prompt}: ${REASON_WORDS[mark.reason] || mark.reason}`;
    case "summarized":
      return "folded into a summary";
    case "command":
      return "a command, never sent to the model";
    case "failed":
      return "failed, not sent";
    default:
      return "";
  }
}

/** The error a message carries: a failed turn's input, a cut-off reply, a failed regenerate or continue. */
function errorOf(m) {
  if (m.meta?.failed) return { code: m.meta.failed.code, words: "This message was not answered." };
  if (m.meta?.error) {
    const action = m.meta.error.action === "continue" ? "Continuing" : "Regenerating";
    return { code: m.meta.error.code, words: `${action} this reply failed; it is unchanged.` };
  }
  if (m.meta?.partial && m.meta.partial_reason !== STATUS.CANCELLED)
    return { code: m.meta.error_code || "GENERATION_INTERRUPTED", words: "The reply was cut off; what came is kept." };
  return null;
}

function badges(m, mark, kind) {
  const out = [];
  const excludedByUser = m.meta?.manualExcluded === true;
  if (m.meta?.command) out.push(badge("command", "info"));
  if (m.pinned) out.push(badge("pinned", "pin"));
  if (m.standing) out.push(badge("standing instruction", "pin", { title: REASON_WORDS.standing }));
  if (excludedByUser) out.push(badge("excluded by you", "warn"));
  if (m.meta?.partial) out.push(badge(`partial: ${m.meta.partial_reason === STATUS.CANCELLED ? "stopped" : "cut off"}`, "warn", { title: "Only what was streamed before the reply ended" }));
  if (m.meta?.failed) out.push(badge("failed: not sent", "warn", { title: `The turn failed (${m.meta.failed.code}); left out of prompts until retried` }));
  const next = kind === "audit" ? "last prompt" : "next prompt";
  if (mark?.state === "summarized") out.push(badge("summarized", "sum", { title: "Folded into a summary: hidden from prompts, not deleted" }));
  else if (mark?.state === "in" && mark.reason === "recalled") out.push(badge(`recalled into ${next}`, "ok", { title: REASON_WORDS.recalled }));
  else if (mark?.state === "out" && !(mark.reason === "manual" && excludedByUser))
    out.push(badge(`not in ${next}: ${mark.reason}`, "out", { title: REASON_WORDS[mark.reason] || mark.reason }));
  return out;
}

function tokenFacts(m, mark) {
  const facts = [];
  if (mark?.tokens != null) facts.push(h("span.tokens", { title: "What this message costs in the prompt" }, `${num(mark.tokens)} tok`));
  const out = m.meta?.usage?.output_tokens;
  if (m.role === "assistant" && out != null) facts.push(h("span.tokens.reply-tokens", { title: "Tokens the model wrote for this reply" }, `reply ${num(out)} tok`));
  return facts;
}

function actions(m, ui, act) {
  if (m.pending) return null;
  if (ui.confirm) {
    return h(
      "div.msg-actions.confirm",
      h("span", "Delete this message?"),
      h("button.small.danger", { type: "button", dataset: { action: "confirm-delete" }, onclick: () => act.remove(m) }, "Delete"),
      actionButton("keep", "Keep", () => act.keep(m)),
    );
  }
  const excluded = m.meta?.manualExcluded === true;
  const busy = act.busy();
  const list = [];
  const switcher = versionSwitcher(m, act, busy);
  if (switcher) list.push(switcher);
  if (m.role === "user" && m.meta?.failed && act.isNewest(m)) list.push(actionButton("retry", "Retry", () => act.retry(m), { disabled: busy, class: "primary" }));
  if (m.role === "assistant" && !m.meta?.command && act.isNewest(m)) {
    if (m.meta?.partial && typeof m.content === "string" && !m.tool_calls?.length)
      list.push(actionButton("continue", "Continue", () => act.continueReply(m), { disabled: busy, title: "Ask the model to go on from where the reply stopped" }));
    list.push(actionButton("regenerate", "Regenerate", () => act.regenerate(m), { disabled: busy, title: "Answer again; this reply stays as a version to page back to" }));
  }
  if (m.role === "user" && !m.meta?.command && typeof m.content === "string")
    list.push(actionButton("edit", "Edit", () => act.startEdit(m), { disabled: busy }));
  list.push(actionButton("copy", "Copy", () => act.copy(m), { title: "Copy the text" }));
  if (m.standing)
    list.push(
      actionButton("dismiss-standing", "Dismiss instruction", () => act.dismissStanding(m), {
        title: "Stop keeping this message in every prompt as a standing instruction",
      }),
    );
  list.push(
    actionButton("pin", m.pinned ? "Unpin" : "Pin", () => act.pin(m, !m.pinned), {
      class: "pin",
      "aria-pressed": String(m.pinned),
      title: m.pinned ? "Unpin: may be dropped again when the context is full" : "Pin: always keep in the prompt",
    }),
    actionButton("exclude", excluded ? "Include" : "Exclude", () => act.exclude(m, !excluded), {
      class: "exclude",
      "aria-pressed": String(excluded),
      title: excluded ? "Include in the prompt again" : "Leave out of the prompt",
    }),
    actionButton("delete", "Delete", () => act.askDelete(m), { class: "delete" }),
  );
  // A command and its answer are never sent to the model: Pin and Exclude would mean nothing for them.
  const shown = m.meta?.command ? list.filter((b) => b.dataset?.action !== "pin" && b.dataset?.action !== "exclude") : list;
  return h("div.msg-actions", shown);
}

/**
 * The element of one message. mark: its mark in the prompt (marks.js); kind: "preview" | "audit";
 * ui: {editing, confirm, draft}; act: the history's actions.
 */
export function messageEl(m, { mark, kind, ui, act }) {
  const state = mark?.state;
  const out = state === "out" || state === "summarized" || state === "command" || state === "failed";
  const heard = markWords(mark, kind);
  const error = errorOf(m);
  const classes = ["msg", `role-${m.role}`];
  if (out) classes.push("out");
  if (state === "summarized") classes.push("summarized");
  if (mark?.reason === "recalled") classes.push("recalled");
  if (m.pinned) classes.push("pinned");
  if (m.standing) classes.push("standing");
  if (m.pending) classes.push("pending");
  if (m.meta?.command) classes.push("command");
  if (error) classes.push("has-error");
  return h(
    "article",
    {
      class: classes.join(" "),
      id: `msg-${m.id}`,
      tabindex: -1,
      dataset: {
        messageId: m.id,
        seq: m.seq ?? "",
        position: m.position ?? "",
        state: state || "",
        reason: state === "summarized" ? "summarized" : mark?.reason || "",
      },
      "aria-label": `${roleName(m)}, message ${m.position ?? ""}${heard ? `, ${heard}` : ""}`,
    },
    h(
      "header.msg-head",
      h("span.role", roleName(m)),
      m.name ? h("span.muted", ` ${m.name}`) : null,
      m.position != null ? h("span.seq", `#${m.position}`) : null, // its place in the chat (seqs have gaps)
      tokenFacts(m, mark),
      badges(m, mark, kind),
    ),
    ui.editing ? editForm(m, ui, act) : h("div.msg-body", contentNodes(m)),
    error
      ? h(
          "div.msg-error",
          { role: "note" },
          h("strong", error.words),
          " ",
          errorWords(error.code, ""),
          " ",
          h("code", error.code),
          " ",
          actionButton("open-prompt", "Open the prompt view", () => act.openPrompt(), { class: "link" }),
        )
      : null,
    ui.editing ? null : actions(m, ui, act),
  );
}
