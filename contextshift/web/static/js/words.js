// Plain words for the service's stable codes.

/** The status words of every record (audits, compaction runs, jobs, attempts): contextshift/core/vocabulary.py's,
 * one word per meaning (tests/core/test_vocabulary.py checks that they match). */
export const STATUS = Object.freeze({
  PREPARED: "prepared",
  QUEUED: "queued",
  RUNNING: "running",
  COMPLETED: "completed",
  FAILED: "failed",
  CANCELLED: "cancelled",
  INTERRUPTED: "interrupted",
  SKIPPED: "skipped",
});

/** A status's badge tone: success "ok", failure "bad", under way "info", anything else `other`. */
export function statusTone(status, other = "muted") {
  if (status === STATUS.COMPLETED) return "ok";
  if (status === STATUS.FAILED) return "bad";
  if (status === STATUS.RUNNING) return "info";
  return other;
}

export const ERROR_WORDS = {
  TOKEN_BUDGET_EXCEEDED:
    "The prompt did not fit: the protected parts alone (system prompt, persona, pinned messages and your input) need more tokens than the context window leaves after the reply reserve. Nothing was sent to the model.",
  PROVIDER_AUTH: "The provider refused the API key. Check the key in Providers and models.",
  PROVIDER_RATE_LIMITED: "The provider is rate-limiting requests. Wait a moment and try again.",
  PROVIDER_TIMEOUT: "The provider took too long to answer: it is busy, or its address is not reachable from the server.",
  PROVIDER_UNAVAILABLE: "The connection to the provider broke off, or it said it is overloaded. Try again in a moment.",
  PROVIDER_CONNECTION_REFUSED:
    "Connection refused: nothing is listening at the provider's address and port. Is the server running, and is the port in the base URL right?",
  PROVIDER_DNS_FAILED: "The provider's host name could not be found (DNS). Check the host in the base URL.",
  PROVIDER_TLS_FAILED:
    "The secure connection (TLS) to the provider failed: its certificate is not trusted, or the address speaks plain HTTP. Check https:// against http:// in the base URL.",
  PROVIDER_SERVER_ERROR: "The provider answered with a server error (HTTP 5xx): the fault is on its side. Try again later.",
  PROVIDER_CONTEXT_LENGTH:
    "The provider said the prompt is too long for the model. Its real context window may be smaller than the one configured.",
  PROVIDER_BAD_REQUEST: "The provider rejected the request as invalid.",
  EMPTY_RESPONSE: "The model returned an empty reply.",
  GENERATION_FAILED: "The generation failed for an unexpected reason.",
  GENERATION_CANCELLED: "The generation was stopped before it finished.",
  GENERATION_INTERRUPTED: "The generation was cut off (the service stopped or the connection dropped) before it finished.",
  MODEL_NOT_CONFIGURED: "This bot has no chat model yet. Choose one in the bot's settings.",
  MODEL_NOT_CHAT: "The bot's model is not a chat model.",
  MODEL_DISABLED: "The bot's chat model is disabled. Enable it in Providers and models.",
  PROVIDER_DISABLED: "The chat model's provider is disabled. Enable it in Providers and models.",
  NETWORK: "The service cannot be reached. Is contextshift serve running?",
  "compaction.model_unavailable": "Compaction cannot run with the current model settings.",
};

export function errorWords(code, fallback) {
  return ERROR_WORDS[code] || fallback || `Error ${code}.`;
}

/** Why a block was left out of (or kept in) the prompt: one key per reason of contextshift/core/vocabulary.py
 * (tests/core/test_vocabulary.py checks that they match). */
export const REASON_WORDS = {
  protected: "always kept (system prompt, persona, pinned or the current input)",
  fit: "fit in the budget",
  recalled: "older history brought back because the current input asks about it",
  standing: "a standing instruction of yours: kept in every prompt (within a tenth of the budget)",
  disabled: "switched off",
  "not-triggered": "its keys did not appear in the recent messages",
  "lore-budget": "lorebook and memory blocks filled their share of the budget",
  empty: "empty",
  manual: "excluded by you",
  "context-shift": "dropped to fit the context window (oldest first)",
  summarized: "folded into a summary",
  "low-relevance": "not relevant enough to the input",
  "final-budget": "dropped by the final budget check",
  interceptor: "removed by an interceptor",
  "plugin-rejected": "a plugin's change was rejected",
};

export const COMPACTION_REASONS = {
  "not-configured": "No compaction model is set and the bot has no chat model.",
  "not-chat-model": "The compaction model is not a chat model.",
  "model-disabled": "The compaction model is disabled.",
  "provider-disabled": "The compaction model's provider is disabled.",
  "provider-host-not-allowed": "The compaction model's provider points at a host this server does not allow (CONTEXTSHIFT_PROVIDER_HOSTS).",
  "output-limit-unsupported":
    "The model's provider does not enforce output token limits (OpenAI Codex), so it cannot summarize safely. Pick a compaction model in the bot's settings.",
  "window-unknown": "The model has no declared context window; set one on the model to enable compaction.",
  disabled: "Compaction is turned off in the bot's settings.",
  cooldown: "A recent automatic attempt failed; automatic compaction waits a few minutes before trying again.",
};

export function compactionWords(reason) {
  if (!reason) return "";
  return COMPACTION_REASONS[reason] || String(reason).replace(/[-_]/g, " ");
}

/** Why the summary check refused a compaction's summary (core/compaction/plausibility.py), in plain words. */
export const REJECTION_WORDS = {
  "other-script": "the summary is written in another alphabet than the conversation",
  "other-language": "the summary is in another language than the conversation",
  "few-facts": "the summary keeps too few of the conversation's names and numbers",
  refusal: "the model refused to summarize instead of writing a summary",
};

export function rejectionWords(reason) {
  return REJECTION_WORDS[reason] || reason;
}

export const TRIGGER_WORDS = {
  background: "automatic (after a turn)",
  sync: "automatic (before a turn)",
  manual: "manual",
};
