// The label form: the work card and the answers, every key handled here with no server
// round trip. Enter sends one "action" trigger with the whole label; the server stores it
// and renders the next work. Keys typed while an action is on its way are kept in order and
// replayed on what the server shows next (or reported, never silently dropped).
import {
  add, button, el, isTextField, letterOf, listen, newId, optionIndex, optionKey, origin, reveal,
  snapshot,
} from "./common.js";
import { dropDraft, loadDraft, pruneDrafts, saveDraft } from "./drafts.js";
import { paintActions, paintCard, paintFeedback, paintQuestions } from "./label_parts.js";

// ---------------------------------------------------------------- state kept across renders
// Drafts by (user, campaign, work, mode): a rerun or a re-render never loses typed answers.
// A queue work's draft is also kept in localStorage (drafts.js): a reload finds it again.
const drafts = {
  map: new Map(),
  get(key) { return this.map.get(key); },
  set(key, draft) { this.map.set(key, draft); },
  drop(key) { this.map.delete(key); },
};
const holder = {};  // the document key listener
const S = {
  data: null, root: null, parts: null, send: null,
  pending: null,   // {id, kind, key, at}: an action sent, not yet acknowledged
  buffer: [],      // keys typed while pending, in order
  lastSubmitKey: -1e9, keysSinceSubmit: 1,
  ui: { msg: null, codebook: false, details: false, workKey: null, noteFocus: false,
        feedbackOpen: true, feedbackDetails: false },
};

const CONF = [[1, "L", "low"], [2, "M", "medium"], [3, "H", "high"]];
pruneDrafts();

function draftKey(ctx) {
  return ctx ? [ctx.user, ctx.campaign, ctx.work, ctx.mode].join("|") : null;
}

/** A draft shaped for these questions: only their options kept (a stored draft may be old). */
function copyDraft(d, questions) {
  const answers = {};
  for (const q of questions) {
    const v = d && d.answers ? d.answers[q.name] : null;
    answers[q.name] = q.kind === "multi"
      ? (Array.isArray(v) ? q.labels.filter((l) => v.includes(l)) : [])
      : (q.labels.includes(v) ? v : null);
  }
  const conf = CONF.some((c) => c[0] === d?.confidence) ? d.confidence : null;
  const active = Number.isInteger(d?.active) ? d.active : 0;
  return { answers, confidence: conf, flagged: d?.flagged === true,
           note: typeof d?.note === "string" ? d.note : "",
           active: Math.max(0, Math.min(active, questions.length - 1)),
           shownAt: performance.now() - (Number(d?.spent) > 0 ? Number(d.spent) : 0) };
}

function current() {
  const d = S.data;
  if (!d || d.state !== "work") return null;
  const key = draftKey(d.ctx);
  let draft = drafts.get(key);
  if (!draft) {  // first shown in this page: answers left unsaved before a reload come back
    const stored = loadDraft(d.ctx);
    draft = copyDraft(stored || d.draft, d.questions);
    drafts.set(key, draft);
    if (stored) say("info", `Your unsaved answers to ${d.work_id} were restored.`);
  }
  return { key, draft, questions: d.questions };
}

/** Keep the shown work's draft in the browser (done after every change). */
function persist(cur) {
  if (cur && S.data) saveDraft(S.data.ctx, cur.draft, performance.now() - cur.draft.shownAt);
}

// ---------------------------------------------------------------- the draft's rules
function choose(cur, qi, label) {
  const q = cur.questions[qi];
  const d = cur.draft;
  d.active = qi;
  if (q.kind === "multi") {
    const chosen = new Set(d.answers[q.name] || []);
    if (chosen.has(label)) chosen.delete(label); else chosen.add(label);
    d.answers[q.name] = q.labels.filter((l) => chosen.has(l));
    return;
  }
  d.answers[q.name] = label;
  move(cur, 1);
}

function move(cur, step) {
  const n = cur.questions.length;
  cur.draft.active = Math.max(0, Math.min(n - 1, cur.draft.active + step));
}

function missing(cur) {
  return cur.questions.filter((q) => q.kind !== "multi" && cur.draft.answers[q.name] == null);
}

function say(kind, text) { S.ui.msg = kind ? { kind, text } : null; }

// ---------------------------------------------------------------- actions sent to the server
function send(kind, extra = {}, key = null) {
  const id = newId();
  S.pending = { id, kind, key, ctx: S.data ? S.data.ctx : null, at: performance.now() };
  S.send("action", { id, type: kind, ...extra });
  window.setTimeout(() => {
    if (S.pending && S.pending.id === id) {
      say("warning", "The server has not answered for 20 s; the keys you type are kept and "
          + "apply once it does.");
      paintForm();
    }
  }, 20000);
}

function submit(skipReason, k) {
  const cur = current();
  if (!cur) return;
  if (k && (k.repeat || (k.t - S.lastSubmitKey < S.data.double_press_ms
                         && S.keysSinceSubmit === 0))) {
    say("info", "A second submit key right after the first was ignored (double press).");
    return;
  }
  if (k) { S.lastSubmitKey = k.t; S.keysSinceSubmit = 0; }
  if (!skipReason) {
    const gaps = missing(cur);
    if (gaps.length) {
      say("error", "Answer every question first: " + gaps.map((q) => q.name).join(", "));
      cur.draft.active = cur.questions.indexOf(gaps[0]);
      return;
    }
  }
  const d = cur.draft;
  say("info", skipReason ? "Skipping…" : "Saving…");
  send("submit", {
    submission_id: S.data.submission_id, work_id: S.data.work_id, answers: d.answers,
    confidence: d.confidence, flagged: d.flagged, note: d.note, skip_reason: skipReason,
    time_on_item_ms: Math.round(performance.now() - d.shownAt),
    scores_visible: !!S.data.scores_visible,
  }, cur.key);
}

// ---------------------------------------------------------------- keys
function noteInput() { return S.parts && S.parts.note; }

/** A key typed while the note has the focus (live: the browser types it; replayed: we do). */
function noteKey(k, live) {
  const note = noteInput();
  if (k.key === "Escape" || k.key === "Enter" || k.key === "Tab") {
    note.blur();
    return true;
  }
  if (live) return false;
  const cur = current();
  if (k.key === "Backspace") note.value = note.value.slice(0, -1);
  else if (k.key.length === 1 && !k.ctrl && !k.meta) note.value += k.key;
  if (cur) { cur.draft.note = note.value; persist(cur); }
  return true;
}

function workKey(k, cur) {
  const d = S.data;
  const letter = letterOf(k);
  if (k.key === "Enter") { submit(null, k); return true; }
  if (k.alt) {
    const n = /^Digit([1-9])$/.exec(k.code || "");
    const skip = n ? d.skip[Number(n[1]) - 1] : null;
    if (skip) { submit(skip.reason, k); return true; }
    return false;
  }
  S.keysSinceSubmit += 1;
  const oi = optionIndex(k);
  if (oi !== null) {
    const q = cur.questions[cur.draft.active];
    if (oi < q.labels.length) choose(cur, cur.draft.active, q.labels[oi]);
    else say("info", `${q.name} has no option ${optionKey(oi)}.`);
    return true;
  }
  if (k.key === "ArrowUp" || k.key === "ArrowDown") {
    move(cur, k.key === "ArrowUp" ? -1 : 1);
    return true;
  }
  if (k.key === "Tab") { focusNote(); return true; }
  if (k.key === "Escape") { S.ui.codebook = false; say(null); return true; }
  const qi = cur.questions.findIndex((q) => q.key && q.key === letter);
  if (qi >= 0) { cur.draft.active = qi; return true; }
  const conf = CONF.find((c) => c[1] === letter);
  if (conf) {
    cur.draft.confidence = cur.draft.confidence === conf[0] ? null : conf[0];
    return true;
  }
  if (letter === "F") { cur.draft.flagged = !cur.draft.flagged; return true; }
  if (letter === "D") { S.ui.codebook = !S.ui.codebook; return true; }
  if (letter === "A" && d.card.abstract.retry) { send("retry_abstract"); return true; }
  return false;
}

// Keys that scroll the abstract's box (no text field has the focus: the note takes them as
// text). Space is bound to nothing else in the form (README's key table); Shift+Space goes up.
const SCROLL = { PageDown: 0.9, PageUp: -0.9, " ": 0.9, End: Infinity, Home: -Infinity };

/** Scroll the abstract for a scrolling key; false when it is no such key or nothing scrolls
 *  (the page then scrolls as usual). */
function scrollAbstract(k) {
  if (!Object.hasOwn(SCROLL, k.key) || k.alt) return false;
  const box = S.parts && S.parts.card.querySelector(".lf-abstract-text");
  if (!box || box.scrollHeight <= box.clientHeight) return false;
  let step = SCROLL[k.key];
  if (k.key === " " && k.shift) step = -step;
  if (step === Infinity) box.scrollTop = box.scrollHeight;
  else if (step === -Infinity) box.scrollTop = 0;
  else box.scrollTop += Math.round(step * box.clientHeight);
  return true;
}

/** Apply one key; returns whether the form used it. */
function handle(k, live) {
  const d = S.data;
  if (!d || k.ctrl || k.meta) return false;
  if (S.ui.noteFocus && S.parts && S.parts.note) return noteKey(k, live);
  if (S.pending) {
    if (/^(Shift|Alt|Control|Meta|CapsLock)$/.test(k.key)) return false;
    S.buffer.push(k);
    return true;
  }
  if (d.state === "work" && scrollAbstract(k)) return true;  // the form itself is unchanged
  const letter = letterOf(k);
  let used = false;
  if (letter === "B" && !k.alt && d.ctx) { send("back"); used = true; }
  else if (letter === "N" && !k.alt && d.editing) { send("resume"); used = true; }
  else {
    const cur = current();
    if (!cur) return false;
    used = workKey(k, cur);
  }
  if (used) repaint();
  return used;
}

/** Paint the form after a change. When an action is on its way, Streamlit sends it from a
 *  zero-delay timer; painting now would make the browser draw a frame before that timer
 *  runs, so paint right after it instead. */
function repaint() {
  if (S.pending) window.setTimeout(() => paintForm(false), 0);
  else paintForm(true);
}

/** Whether one of Streamlit's dialogs is open over the page (its keys are its own: Esc
 *  closes it). */
function dialogOpen() {
  return [...document.querySelectorAll('[role="dialog"]')].some(
    (node) => !S.root.contains(node) && node.getClientRects().length > 0);
}

function onKeyDown(ev) {
  if (!S.root || !S.root.isConnected) return;
  if (ev.isComposing || dialogOpen()) return;
  const target = origin(ev);
  if (isTextField(target)) {
    if (target === noteInput() && ["Escape", "Enter", "Tab"].includes(ev.key)) {
      ev.preventDefault();
      noteKey(snapshot(ev), true);
    } else if (target.tagName === "SELECT" && ev.key === "Escape") {
      target.blur();
    }
    return;  // text for the field, not a command
  }
  if (ev.key === " " && target.closest && target.closest("button, a, summary, [role=button]")
      && !S.root.contains(target)) {
    return;  // Space presses the page's own control that has the focus (Sign out, a link)
  }
  if (handle(snapshot(ev), true)) {
    ev.preventDefault();
    ev.stopPropagation();
  }
}

function focusNote() {
  const note = noteInput();
  if (note) note.focus();
}

// ---------------------------------------------------------------- painting
function paintTop() {
  const d = S.data;
  const top = el("div", "lf-top");
  if (d.campaigns.length) {
    const pick = el("select", "lf-campaign");
    pick.title = "Campaign";
    for (const c of d.campaigns) {
      const opt = el("option", null, c.name);
      opt.value = String(c.id);
      opt.selected = c.id === d.campaign;
      pick.appendChild(opt);
    }
    pick.addEventListener("change", () => {
      pick.blur();  // keys work at once after a campaign is picked
      if (!S.pending) send("campaign", { campaign_id: Number(pick.value) });
    });
    add(top, el("span", "lf-muted", "Campaign"), pick);
  }
  if (d.progress) {
    const bar = el("div", "lf-bar");
    const done = add(bar, el("div", "lf-fill")).lastChild;
    const started = add(bar, el("div", "lf-fill lf-fill-started")).lastChild;
    done.style.width = `${(100 * d.progress.fraction).toFixed(2)}%`;
    started.style.width = `${(100 * (d.progress.started_fraction || 0)).toFixed(2)}%`;
    bar.title = "Works complete (dark), started (light)";
    add(top, add(el("div", "lf-progress"), el("span", null, d.progress.text), bar));
  }
  return top;
}

function paintMessage() {
  const m = S.ui.msg;
  const box = el("div", "lf-msg" + (m ? ` lf-${m.kind}` : ""), m ? m.text : "");
  box.setAttribute("role", "status");
  return box;
}

function paintForm(revealActive) {
  if (!S.parts) return;
  const d = S.data;
  const cur = current();
  const form = el("div", "lf-form");
  add(form, paintMessage());
  if (d.feedback) {
    add(form, paintFeedback(S, { feedbackOpen: (open) => { S.ui.feedbackOpen = open; },
                                 feedbackDetails: (open) => { S.ui.feedbackDetails = open; } }));
  }
  if (d.state === "work" && cur) {
    const api = actionsApi();
    add(form, ...paintQuestions(S, cur, { choose: (qi, label) => api.choose(cur, qi, label),
                                          activate: (qi) => api.activate(cur, qi) }));
    add(form, paintActions(S, cur, api));
  } else {
    add(form, paintEmpty(d));
  }
  persist(cur);
  const typing = S.ui.noteFocus;
  S.parts.form.replaceWith(form);
  S.parts.form = form;
  S.parts.note = form.querySelector(".lf-note");
  if (typing && S.parts.note) {  // a render while writing: keep writing, at the end
    const input = S.parts.note;
    input.focus();
    input.setSelectionRange(input.value.length, input.value.length);
  }
  if (revealActive) reveal(form.querySelector(".lf-q.lf-active") || form.firstChild);
}

/** What the mouse does: the same as the keys; nothing while an action is on its way (the
 *  work on screen is being saved or replaced). */
function actionsApi() {
  const idle = (fn) => (...args) => { if (!S.pending) fn(...args); };
  return {
    submit: idle((skip) => { submit(skip, null); repaint(); }),
    toggleConf: idle((v) => { const c = current(); c.draft.confidence = c.draft.confidence === v
      ? null : v; paintForm(false); }),
    toggleFlag: idle(() => { const c = current(); c.draft.flagged = !c.draft.flagged;
      paintForm(false); }),
    toggleCodebook: () => { S.ui.codebook = !S.ui.codebook; paintForm(true); },
    back: idle(() => { send("back"); repaint(); }),
    resume: idle(() => { send("resume"); repaint(); }),
    choose: idle((cur, qi, label) => { choose(cur, qi, label); paintForm(true); }),
    activate: idle((cur, qi) => { cur.draft.active = qi; paintForm(true); }),
    noteFocus: (on) => { S.ui.noteFocus = on; },
    noteInput: (value) => { const c = current(); if (c) { c.draft.note = value; persist(c); } },
  };
}

function paintEmpty(d) {
  const box = el("div", "lf-empty");
  if (d.state === "done") {
    add(box, el("p", "lf-success", "Nothing left for you in this campaign: every work has its "
      + "labels or you have seen it. Thank you!"));
    add(box, button("lf-btn", "Check again", () => { if (!S.pending) send("again"); }));
  } else if (d.state === "notice") {
    add(box, el("p", "lf-warning", d.notice));
    add(box, button("lf-btn", "Try again", () => { if (!S.pending) send("again"); }));
  } else {
    add(box, el("p", "lf-info", "No campaign is open. A lead creates campaigns on the "
      + "Campaigns page."));
  }
  if (d.ctx) add(box, button("lf-btn", "Edit previous label (B)", () => {
    if (!S.pending) send("back"); }));
  return box;
}

function paintAll() {
  const d = S.data;
  const root = el("div", "lf");
  const body = el("div", "lf-body");
  const left = paintCard(S, { retry: () => { if (!S.pending) send("retry_abstract"); },
                              details: (open) => { S.ui.details = open; } });
  const form = el("div", "lf-form");
  add(body, left, form);
  add(root, paintTop(), body);
  S.parts = { form, card: left, note: null };
  const old = S.root;
  if (old && old.parentNode) old.replaceWith(root);
  S.root = root;
  return root;
}

// ---------------------------------------------------------------- a render from the server
/** Resolve the action this render acknowledges; returns the keys to replay on it. */
function settle(data) {
  const p = S.pending;
  if (!p || data.ack !== p.id) return { settled: false, replay: [] };
  S.pending = null;
  const keys = S.buffer;
  S.buffer = [];
  say(data.message ? data.message.kind : null, data.message ? data.message.text : "");
  if (p.kind === "submit" && data.ack_ok && p.key) { drafts.drop(p.key); dropDraft(p.ctx); }
  if (!data.ack_ok && keys.length) {  // they were meant for what did not come: said, not used
    const typed = keys.map((k) => (k.shift && k.key.length > 1 ? "Shift+" : "") + k.key);
    say("error", `${data.message ? data.message.text + " " : ""}${keys.length} key(s) typed `
        + `while waiting were not applied: ${typed.join(" ")}`);
    return { settled: true, replay: [] };
  }
  return { settled: true, replay: keys };
}

export default function render({ parentElement, data, setTriggerValue }) {
  S.send = setTriggerValue;
  const { settled, replay } = settle(data);
  if (!settled && data.message) say(data.message.kind, data.message.text);
  S.data = data;
  const key = data.state === "work" ? draftKey(data.ctx) : `${data.state}|${data.campaign}`;
  if (key !== S.ui.workKey) {  // a new work: the definitions panel and the details close
    S.ui.workKey = key;
    S.ui.codebook = false;
    S.ui.details = false;
    S.ui.noteFocus = false;
    S.ui.feedbackOpen = true;  // the feedback on the label just sent, open in view
    S.ui.feedbackDetails = false;
  }
  if (!S.root || !parentElement.contains(S.root)) {
    S.root = null;
    parentElement.appendChild(paintAll());
  } else {
    paintAll();
  }
  paintForm(true);
  for (const k of replay) handle(k, false);
  return listen(holder, onKeyDown);
}
