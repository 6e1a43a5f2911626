// Message text as CommonMark (code blocks, lists, emphasis, links), safely: markdown-it with raw HTML off
// (an HTML tag in a message stays text), then DOMPurify over its output, inserted as a DOM fragment.
// Both libraries are vendored in /vendor/ (see vendor/README.md); nothing is loaded from elsewhere.

import "../vendor/markdown-it.min.js";
import DOMPurify from "../vendor/purify.es.js";

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

/** A DocumentFragment of the rendered text (no script, no handler, no inline style survives). */
export function markdown(text) {
  return DOMPurify.sanitize(md.render(String(text ?? "")), PURIFY);
}
