// The service's HTTP API (/api/v2) and its server-sent event stream for generation.

export const BASE = "/api/v2";

export class ApiError extends Error {
  constructor(status, code, message, params = {}) {
    super(message || code);
    this.status = status;
    this.code = code;
    this.params = params || {};
  }

  /** The route does not exist on this server (an older build): feature-detect with this. */
  get missing() {
    return this.status === 404 && this.code === "NOT_FOUND";
  }
}

async function errorOf(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  const error = body && body.error ? body.error : {};
  return new ApiError(
    response.status,
    error.code || `HTTP_${response.status}`,
    error.message || response.statusText || "The request failed.",
    error.params,
  );
}

/** The CSRF header a signed-in browser's change carries: the value of the contextshift_csrf cookie. */
export function csrfHeaders() {
  const found = document.cookie.split("; ").find((c) => c.startsWith("contextshift_csrf="));
  return found ? { "X-CSRF-Token": decodeURIComponent(found.slice("contextshift_csrf=".length)) } : {};
}

export async function request(method, path, body, { signal } = {}) {
  let response;
  const change = method !== "GET" && method !== "HEAD" ? csrfHeaders() : {};
  try {
    response = await fetch(BASE + path, {
      method,
      headers:
        body === undefined
          ? { Accept: "application/json", ...change }
          : { "Content-Type": "application/json", Accept: "application/json", ...change },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, "NETWORK", "The service cannot be reached. Is contextshift serve running?");
  }
  if (!response.ok) throw await errorOf(response);
  if (response.status === 204) return null;
  return response.json();
}

export const get = (path, opts) => request("GET", path, undefined, opts);
export const post = (path, body, opts) => request("POST", path, body ?? {}, opts);
export const patch = (path, body, opts) => request("PATCH", path, body, opts);
export const del = (path, opts) => request("DELETE", path, undefined, opts);

/** GET that answers null when the route is missing on this server (feature detection). */
export async function optional(path) {
  try {
    return await get(path);
  } catch (error) {
    if (error instanceof ApiError && error.missing) return null;
    throw error;
  }
}

/**
 * POST /chats/{id}/generate and read its text/event-stream with fetch + ReadableStream.
 * input: the new message's text, or a body naming what to redo ({retry_of}, {regenerate_of}, {continue_of}).
 * handlers: {token(text), done({message, usage}), error({code, message, params})}. Resolves when the stream ends.
 * Aborting `signal` stops the request (the server cancels the provider call).
 */
export async function generate(chatId, input, handlers, { signal } = {}) {
  const body = typeof input === "string" ? { content: input } : input;
  let response;
  try {
    response = await fetch(`${BASE}/chats/${encodeURIComponent(chatId)}/generate`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream", ...csrfHeaders() },
      body: JSON.stringify({ ...body, stream: true }),
      signal,
    });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, "NETWORK", "The service cannot be reached. Is contextshift serve running?");
  }
  if (!response.ok) throw await errorOf(response);
  const type = response.headers.get("content-type") || "";
  if (!type.includes("text/event-stream")) {
    // A non-streaming answer (should not happen with stream: true, but be lenient).
    const body = await response.json();
    handlers.done?.(body);
    return;
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let finished = false;
  const dispatch = (block) => {
    let event = "message";
    const data = [];
    for (const line of block.split(/\r?\n/)) {
      if (!line || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const name = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (name === "event") event = value;
      else if (name === "data") data.push(value);
    }
    if (!data.length) return;
    let payload;
    try {
      payload = JSON.parse(data.join("\n"));
    } catch {
      return;
    }
    if (event === "token") handlers.token?.(payload.text || "");
    else if (event === "done") {
      finished = true;
      handlers.done?.(payload);
    } else if (event === "error") {
      finished = true;
      handlers.error?.(payload);
    }
  };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, "");
        dispatch(block);
      }
    }
    buffer += decoder.decode();
    if (buffer.trim()) dispatch(buffer);
  } finally {
    reader.releaseLock?.();
  }
  if (!finished) {
    handlers.error?.({ code: "GENERATION_INTERRUPTED", message: "The stream ended before the reply was complete." });
  }
}

// -- small caches shared by the views --------------------------------------------------------------------

let strategies = null;
/** Context strategies from the registry (the OpenAPI enum of BotCreate.context_strategy). */
export async function strategyNames() {
  if (strategies) return strategies;
  const fallback = ["truncate", "summarize", "vector-recall", "recall", "manual"];
  try {
    const response = await fetch("/openapi.json");
    const doc = await response.json();
    const prop = doc?.components?.schemas?.BotCreate?.properties?.context_strategy;
    const found = new Set();
    const walk = (node) => {
      if (!node || typeof node !== "object") return;
      if (Array.isArray(node.enum)) node.enum.forEach((v) => typeof v === "string" && found.add(v));
      for (const key of ["anyOf", "oneOf", "allOf"]) (node[key] || []).forEach(walk);
    };
    walk(prop);
    strategies = found.size ? [...found] : fallback;
  } catch {
    strategies = fallback;
  }
  return strategies;
}
