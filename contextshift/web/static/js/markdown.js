// Message text as CommonMark (code blocks, lists, emphasis, links), safely: markdown-it with raw HTML off
// (an HTML tag in a message stays text), then DOMPurify over its output, inserted as a DOM fragment.
// Code blocks get a copy button and syntax highlighting by highlight.js, which is loaded only when a message
// has a code block. All three libraries are vendored in /vendor/ (see vendor/README.md); nothing is loaded
// from elsewhere.

import "../vendor/markdown-it.min.js";
import DOMPurify from "../vendor/purify.es.js";
import { h, toast } from "./dom.js";

const md = globalThis.markdownit({ html: false, linkify: true, breaks: true });

// Links open outside the app and never carry the page's address; a code block, which scrolls sideways when its
// lines are long, can be reached with the keyboard to scroll it.
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "PRE") node.setAttribute("tabindex", "0");
  if (node.tagName === "A" && node.hasAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
});

const PURIFY = {
  RETURN_DOM_FRAGMENT: true,
  FORBID_TAGS: ["style", "img", "form", "input", "button", "textarea", "select", "iframe"],
  FORBID_ATTR: ["style"], // the CSP allows no inline style; table alignment is dropped instead
  ALLOW_DATA_ATTR: false,
};

// -- code blocks -------------------------------------------------------------------------------------------

let highlighter = null;
/** highlight.js (its common languages, ~130 kB), imported the first time a message has a code block. */
function loadHighlighter() {
  highlighter ||= import("../vendor/highlight.min.js").then(
    (module) => {
      const hljs = module.default;
      hljs.configure({ ignoreUnescapedHTML: true, throwUnescapedHTML: false });
      return hljs;
    },
    () => null, // an unreachable file leaves the code plain; it is still readable and copyable
  );
  return highlighter;
}

/** The code of a block as the message wrote it: markdown-it ends a fenced block with one newline of its own. */
function codeText(code) {
  return code.textContent.replace(/\n$/, "");
}

/** The language a fence named ("```python" gives class language-python), or "". */
function languageOf(code) {
  const found = [...code.classList].find((c) => c.startsWith("language-"));
  return found ? found.slice("language-".length) : "";
}

async function highlight(code, language) {
  // A block that names no language stays plain rather than guessed (a guess is often wrong for short code).
  if (!language) return;
  const hljs = await loadHighlighter();
  if (!hljs || code.dataset.highlighted || !hljs.getLanguage(language)) return;
  hljs.highlightElement(code);
}

async function copyCode(text, button) {
  let ok = false;
  try {
    await navigator.clipboard.writeText(text);
    ok = true;
  } catch {
    ok = false;
  }
  if (!ok) {
    toast("The browser did not allow copying.", "error");
    return;
  }
  // The toast says it for everyone (an aria-live region), even when the history re-renders this button away.
  toast("Code copied.");
  button.textContent = "Copied";
  button.dataset.copied = "true";
  setTimeout(() => {
    button.textContent = "Copy code";
    delete button.dataset.copied;
  }, 1500);
}

/** Each <pre><code> of the fragment: a header with its language and a copy button; highlighted when it loads. */
function enhanceCode(fragment) {
  for (const pre of fragment.querySelectorAll("pre")) {
    const code = pre.querySelector("code");
    if (!code) continue;
    const text = codeText(code);
    const language = languageOf(code);
    const button = h(
      "button.small.copy-code",
      { type: "button", dataset: { action: "copy-code" }, title: "Copy this code exactly", onclick: () => copyCode(text, button) },
      "Copy code",
    );
    const block = h("div.code-block", { dataset: { language } }, h("div.code-head", h("span.code-lang", language || "code"), button));
    pre.replaceWith(block);
    block.append(pre);
    highlight(code, language);
  }
}

/** A DocumentFragment of the rendered text (no script, no handler, no inline style survives). */
export function markdown(text) {
  const fragment = DOMPurify.sanitize(md.render(String(text ?? "")), PURIFY);
  enhanceCode(fragment);
  return fragment;
}
