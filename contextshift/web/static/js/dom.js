// Tiny DOM helpers: elements are built with h(), never from HTML strings (no injection).

/**
 * h("button.primary#send", {type: "submit", onclick: fn, "aria-label": "Send"}, "Send")
 * Attributes: "class", "for", "dataset" (object), "style" (string), on* (listeners), booleans, others as attributes.
 */
export function h(tag, attrs, ...children) {
  const [name, ...rest] = tag.split(/(?=[.#])/);
  const el = document.createElement(name || "div");
  for (const part of rest) {
    if (part.startsWith(".")) el.classList.add(part.slice(1));
    else if (part.startsWith("#")) el.id = part.slice(1);
  }
  if (attrs && (typeof attrs !== "object" || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") {
      for (const c of String(value).split(/\s+/).filter(Boolean)) el.classList.add(c);
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2).toLowerCase(), value);
    } else if (key === "value" && "value" in el) {
      el.value = value;
    } else if (key === "checked" || key === "selected" || key === "disabled" || key === "open" || key === "hidden") {
      el[key] = Boolean(value);
      if (key === "hidden" || key === "disabled") el.toggleAttribute(key, Boolean(value));
    } else if (key === "style") {
      el.style.cssText = String(value); // CSSOM, not a style attribute: allowed by the CSP (no inline style)
    } else if (value === true) {
      el.setAttribute(key, "");
    } else {
      el.setAttribute(key, String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function replace(el, ...children) {
  clear(el);
  return append(el, children);
}

let uid = 0;
/** A unique id for label/for pairs. */
export function nextId(prefix = "f") {
  uid += 1;
  return `${prefix}-${uid}`;
}

/** A labelled form field: returns {row, input}. */
export function field(label, input, help) {
  if (!input.id) input.id = nextId("field");
  const helpEl = help ? h("p.help", { id: `${input.id}-help` }, help) : null;
  if (helpEl) input.setAttribute("aria-describedby", helpEl.id);
  const row = h("div.field", h("label", { for: input.id }, label), input, helpEl);
  return { row, input };
}

/** A checkbox with its label after it. */
export function checkbox(label, attrs = {}) {
  const input = h("input", { type: "checkbox", ...attrs });
  if (!input.id) input.id = nextId("check");
  const row = h("div.field.check", input, h("label", { for: input.id }, label));
  return { row, input };
}

export function select(options, value, attrs = {}) {
  const el = h("select", attrs);
  for (const option of options) {
    const [v, text, extra] = Array.isArray(option) ? option : [option, option];
    el.append(h("option", { value: v, ...(extra || {}) }, text));
  }
  if (value !== undefined && value !== null) el.value = value;
  return el;
}

const numberFormat = new Intl.NumberFormat("en");
/** Whether the user is typing in a field outside `container`: a view that just loaded must not take that focus. */
export function typingOutside(container) {
  const active = document.activeElement;
  return Boolean(active?.matches?.("input, textarea, select")) && !container.contains(active);
}

export function num(value) {
  return value === null || value === undefined ? "—" : numberFormat.format(value);
}

export function pct(value, digits = 0) {
  return value === null || value === undefined ? "—" : `${(value * 1).toFixed(digits)}%`;
}

export function when(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

export function duration(startIso, endIso) {
  if (!startIso || !endIso) return "—";
  const ms = new Date(endIso).getTime() - new Date(startIso).getTime();
  if (!Number.isFinite(ms) || ms < 0) return "—";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

export function shorten(text, length = 140) {
  const s = String(text ?? "").replace(/\s+/g, " ").trim();
  return s.length > length ? `${s.slice(0, length - 1)}…` : s;
}

export function debounce(fn, ms) {
  let timer = null;
  const wrapped = (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
  wrapped.cancel = () => clearTimeout(timer);
  return wrapped;
}

/** Status messages for everyone (an aria-live region). */
export function toast(message, kind = "info") {
  const region = document.getElementById("toasts");
  if (!region) return;
  const item = h(`div.toast.${kind}`, { role: kind === "error" ? "alert" : "status" }, message);
  const close = h("button.icon", { type: "button", "aria-label": "Dismiss", onclick: () => item.remove() }, "×");
  item.append(close);
  region.append(item);
  setTimeout(() => item.remove(), kind === "error" ? 9000 : 4000);
}

export function badge(text, kind = "", attrs = {}) {
  return h(`span.badge${kind ? `.${kind}` : ""}`, attrs, text);
}

/** Tabs with roving focus and arrow keys (WAI-ARIA tabs pattern). tabs: [{id, label, render(panel)}]. */
export function tabs(items, { label, selected, onchange } = {}) {
  const list = h("div.tablist", { role: "tablist", "aria-label": label || "Tabs" });
  const panels = h("div.tabpanels");
  const buttons = [];
  const panelEls = [];
  const choose = (index, focus = false) => {
    buttons.forEach((b, i) => {
      const on = i === index;
      b.setAttribute("aria-selected", String(on));
      b.tabIndex = on ? 0 : -1;
      panelEls[i].hidden = !on;
    });
    if (focus) buttons[index].focus();
    items[index].render?.(panelEls[index]);
    onchange?.(items[index].id);
  };
  items.forEach((item, index) => {
    const tabId = nextId("tab");
    const panelId = nextId("panel");
    const button = h(
      "button.tab",
      {
        type: "button",
        role: "tab",
        id: tabId,
        "aria-controls": panelId,
        dataset: { tab: item.id },
        onclick: () => choose(index),
        onkeydown: (event) => {
          const n = items.length;
          if (event.key === "ArrowRight") choose((index + 1) % n, true);
          else if (event.key === "ArrowLeft") choose((index - 1 + n) % n, true);
          else if (event.key === "Home") choose(0, true);
          else if (event.key === "End") choose(n - 1, true);
          else return;
          event.preventDefault();
        },
      },
      item.label,
    );
    const panel = h("div.tabpanel", { role: "tabpanel", id: panelId, "aria-labelledby": tabId, tabindex: 0 });
    buttons.push(button);
    panelEls.push(panel);
    list.append(button);
    panels.append(panel);
  });
  const start = Math.max(0, items.findIndex((i) => i.id === selected));
  const el = h("div.tabs", list, panels);
  queueMicrotask(() => choose(start));
  return {
    el,
    select: (id) => choose(Math.max(0, items.findIndex((i) => i.id === id))),
    panel: (id) => panelEls[items.findIndex((i) => i.id === id)],
    current: () => items[buttons.findIndex((b) => b.getAttribute("aria-selected") === "true")]?.id,
  };
}
