// What the prompt holds, read one way for every view: the history's marks, the meter's counts and the prompt
// view's counts and subtotals all come from one prompt (the next-prompt preview, or the last prompt's audit in
// the prompt view's "Last prompt" mode), so they cannot disagree.

/** Reasons that mean "not part of the prompt at all" rather than "left out to fit". */
const INACTIVE = new Set(["empty", "disabled", "not-triggered"]);

/** Prompt view categories (SillyTavern's itemization): which sources each sums. */
export const CATEGORIES = [
  ["system", "System", ["system", "persona", "character", "template", "plugin"]],
  ["lorebook", "Lorebook", ["lorebook"]],
  ["memory", "Memory", ["memory"]],
  ["history", "History", ["history"]],
  ["summary", "Summary", ["summary"]],
  ["input", "Input", ["input"]],
];

/**
 * Counts of one prompt: sent blocks, blocks left out (with the history older than the loaded window, which the
 * entries cannot list), messages a summary stands for, inactive blocks.
 */
export function promptCounts(data) {
  const entries = data?.entries || [];
  const counts = { sent: 0, leftOut: 0, summarized: 0, skipped: 0, notLoaded: data?.history?.not_loaded || 0 };
  let listedSummarized = 0;
  for (const e of entries) {
    if (e.included) counts.sent += 1;
    else if (e.reason === "summarized") listedSummarized += 1;
    else if (INACTIVE.has(e.reason)) counts.skipped += 1;
    else counts.leftOut += 1;
  }
  counts.leftOut += counts.notLoaded;
  counts.summarized = data?.history ? data.history.summarized : listedSummarized;
  return counts;
}

/** Tokens of the sent blocks per category, and what the chat format adds (framing) to reach the prompt total. */
export function subtotals(data) {
  const sums = new Map(CATEGORIES.map(([id]) => [id, 0]));
  const categoryOf = new Map(CATEGORIES.flatMap(([id, , sources]) => sources.map((s) => [s, id])));
  for (const e of data?.entries || []) {
    if (!e.included) continue;
    const id = categoryOf.get(e.source) || "system";
    sums.set(id, sums.get(id) + (e.tokens || 0));
  }
  const listed = [...sums.values()].reduce((a, b) => a + b, 0);
  const total = data?.budget?.prompt_tokens || 0;
  return { rows: CATEGORIES.map(([id, label]) => ({ id, label, tokens: sums.get(id) })), framing: Math.max(0, total - listed), total };
}

/**
 * The mark of every loaded message in one prompt. A mark: {state, reason, tokens}, state one of
 * "in" (sent; reason protected, fit, recalled or standing), "out" (left out; reason from the prompt), "summarized",
 * "command", "failed" (never sent) or "unknown" (newer than the prompt, e.g. while it is being refreshed).
 * Returns {marks: Map(id → mark), boundary (the oldest sent message's id), newest (seq of the newest listed)}.
 */
export function marksOf(data, messages) {
  const marks = new Map();
  const entries = new Map((data?.entries || []).map((e) => [e.identifier, e]));
  let newest = -Infinity;
  for (const m of messages) if (entries.has(m.id)) newest = Math.max(newest, m.seq);
  let boundary = null;
  let boundarySeq = Infinity;
  for (const m of messages) {
    const entry = entries.get(m.id);
    let mark;
    if (m.meta?.command) mark = { state: "command" };
    else if (m.meta?.failed) mark = { state: "failed" };
    else if (entry && entry.included) mark = { state: "in", reason: entry.reason, tokens: entry.tokens };
    else if (entry) mark = { state: entry.reason === "summarized" ? "summarized" : "out", reason: entry.reason, tokens: entry.tokens };
    else if (m.summarized_by && !m.pinned) mark = { state: "summarized", reason: "summarized" };
    else if (data && m.seq < newest) mark = { state: "out", reason: "context-shift" }; // older than the loaded window
    else mark = { state: "unknown" };
    if (mark.state === "in" && m.seq < boundarySeq) {
      boundarySeq = m.seq;
      boundary = m.id;
    }
    marks.set(m.id, mark);
  }
  return { marks, boundary, newest };
}

/** Runs of consecutive summarized messages at least `min` long: Map(first id → ids of the run). */
export function summarizedRuns(messages, marks, min = 3) {
  const runs = new Map();
  let run = [];
  const close = () => {
    if (run.length >= min) runs.set(run[0], run);
    run = [];
  };
  for (const m of messages) {
    if (marks.get(m.id)?.state === "summarized") run.push(m.id);
    else close();
  }
  close();
  return runs;
}
