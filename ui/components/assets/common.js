// Shared by the label and adjudicate forms: DOM building (text only), key reading, one
// document-level key listener per form, and unique action ids.
//
// Every string from the server goes into the page with textContent (el/add): titles,
// abstracts, notes, names and codebook text are never parsed as HTML.

let counter = 0;

/** A new element with an optional class and text (set as text, never as HTML). */
export function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

/** Append the children that are not null; returns the parent. */
export function add(parent, ...children) {
  for (const child of children) if (child) parent.appendChild(child);
  return parent;
}

/** A button that never takes the focus (keys stay with the form), running fn on click. */
export function button(cls, text, fn, title) {
  const b = el("button", cls, text);
  b.type = "button";
  b.tabIndex = -1;
  if (title) b.title = title;
  b.addEventListener("mousedown", (ev) => ev.preventDefault());
  b.addEventListener("click", (ev) => { ev.preventDefault(); fn(); });
  return b;
}

/** A link to an https:// URL only (the server builds them; anything else becomes text). */
export function link(text, href) {
  if (typeof href !== "string" || !href.startsWith("https://")) return el("span", null, text);
  const a = el("a", null, text);
  a.href = href;
  a.target = "_blank";
  a.rel = "noopener noreferrer";
  a.tabIndex = -1;
  return a;
}

/** The element a key event really started from (inside a shadow root too). */
export function origin(ev) {
  const path = typeof ev.composedPath === "function" ? ev.composedPath() : [];
  return path.length ? path[0] : ev.target;
}

/** Whether keys typed on this element are text (an input, a select, an editable area). */
export function isTextField(node) {
  if (!node || node.nodeType !== 1) return false;
  const tag = node.tagName;
  return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || node.isContentEditable;
}

/** The digit of a key (top row or keypad, with or without Shift), else null. */
export function digitOf(k) {
  const m = /^(?:Digit|Numpad)([0-9])$/.exec(k.code || "");
  if (m) return Number(m[1]);
  return /^[0-9]$/.test(k.key) ? Number(k.key) : null;
}

/** Option index of a key: 1..9, 0 -> 0..9; Shift+1..Shift+0 -> 10..19; else null. */
export function optionIndex(k) {
  const d = digitOf(k);
  if (d === null || k.alt) return null;
  const i = d === 0 ? 9 : d - 1;
  return k.shift ? i + 10 : i;
}

/** How the index-th option's key is written (1..9, 0, then ⇧1...). */
export function optionKey(i) {
  if (i < 0 || i >= 20) return "";
  const d = String((i + 1) % 10);
  return i < 10 ? d : "⇧" + d;
}

/** The upper-case letter of a key, or null. */
export function letterOf(k) {
  return typeof k.key === "string" && /^[a-z]$/i.test(k.key) ? k.key.toUpperCase() : null;
}

/** A plain copy of a key event (kept in a buffer and replayed later). */
export function snapshot(ev) {
  return { key: ev.key, code: ev.code, shift: ev.shiftKey, alt: ev.altKey, ctrl: ev.ctrlKey,
           meta: ev.metaKey, repeat: ev.repeat, t: ev.timeStamp || performance.now() };
}

/** A unique id for one action (the server acknowledges it by this id). */
export function newId() {
  counter += 1;
  return `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}-${counter}`;
}

/** Scroll a node into view only as far as needed (nearest edge). */
export function reveal(node) {
  if (node && typeof node.scrollIntoView === "function") {
    node.scrollIntoView({ block: "nearest", inline: "nearest", behavior: "instant" });
  }
}

/**
 * One capturing keydown listener on the document for a form; returns the cleanup function.
 * A newer render owns the listener; an older render's cleanup leaves it in place.
 */
export function listen(holder, handler) {
  if (!holder.listener) {
    holder.listener = (ev) => holder.handler(ev);
    document.addEventListener("keydown", holder.listener, true);
  }
  holder.handler = handler;
  const token = {};
  holder.owner = token;
  return () => {
    if (holder.owner !== token || !holder.listener) return;
    document.removeEventListener("keydown", holder.listener, true);
    holder.listener = null;
  };
}
