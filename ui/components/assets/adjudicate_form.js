// The adjudicate form: a disputed work's card, the annotators' answers side by side, and the
// final answer, by keyboard. Options by digits, J/K next/previous work, F disputed or flagged
// works, Tab to the reason, Enter adjudicates (refused while a question has no majority). One
// action trigger at a time; keys typed while it is on its way are replayed on what the server
// shows next.
import {
  add, button, el, isTextField, letterOf, listen, newId, optionIndex, optionKey, origin,
  reveal, snapshot,
} from "./common.js";
import { optionRow, paintCard } from "./label_parts.js";

const drafts = new Map();  // (user, campaign, work) -> {answers, active, reason}
const holder = {};
const S = {
  data: null, root: null, parts: null, send: null, pending: null, buffer: [],
  ui: { msg: null, reasonFocus: false, details: false, workKey: null },
};

function say(kind, text) { S.ui.msg = kind ? { kind, text } : null; }

function keyOf(d) { return d.ctx ? [d.ctx.user, d.ctx.campaign, d.ctx.work].join("|") : null; }

function current() {
  const d = S.data;
  if (!d || d.state !== "work") return null;
  const key = keyOf(d);
  let draft = drafts.get(key);
  if (!draft) {
    const answers = {};
    for (const q of d.questions) {
      const v = d.prefill[q.name];
      answers[q.name] = Array.isArray(v) ? [...v] : (v ?? null);
    }
    const open = d.questions.findIndex((q) => answers[q.name] == null);
    draft = { answers, active: Math.max(open, 0), reason: "" };  // start where to decide
    drafts.set(key, draft);
  }
  return { key, draft, questions: d.questions };
}

function choose(cur, qi, label) {
  const q = cur.questions[qi];
  const d = cur.draft;
  d.active = qi;
  if (q.kind === "multi") {  // from "no majority", the first key starts an answer
    const chosen = new Set(d.answers[q.name] || []);
    if (chosen.has(label)) chosen.delete(label); else chosen.add(label);
    d.answers[q.name] = q.labels.filter((l) => chosen.has(l));
    return;
  }
  d.answers[q.name] = label;
  d.active = Math.min(cur.questions.length - 1, qi + 1);
}

function send(kind, extra = {}, key = null) {
  const id = newId();
  S.pending = { id, kind, key };
  S.send("action", { id, type: kind, ...extra });
}

function settle() {
  const cur = current();
  if (!cur) return;
  const open = cur.questions.filter((q) => cur.draft.answers[q.name] == null);
  if (open.length) {
    say("error", `${S.data.no_majority[0].toUpperCase()}${S.data.no_majority.slice(1)} on `
        + `${open.map((q) => q.name).join(", ")}: choose an answer first.`);
    cur.draft.active = cur.questions.indexOf(open[0]);
    return;
  }
  if (!cur.draft.reason.trim()) {
    say("error", "A reason is required to adjudicate: Tab to the reason field.");
    return;
  }
  say("info", "Adjudicating…");
  send("adjudicate", { work_id: S.data.work_id, answers: cur.draft.answers,
                       reason: cur.draft.reason }, cur.key);
}

// ---------------------------------------------------------------- keys
function reasonInput() { return S.parts && S.parts.reason; }

function reasonKey(k, live) {
  const input = reasonInput();
  if (k.key === "Escape" || k.key === "Tab") { input.blur(); return true; }
  if (k.key === "Enter") { input.blur(); settle(); paintForm(false); return true; }
  if (live) return false;
  const cur = current();
  if (k.key === "Backspace") input.value = input.value.slice(0, -1);
  else if (k.key.length === 1) input.value += k.key;
  if (cur) cur.draft.reason = input.value;
  return true;
}

function handle(k, live) {
  const d = S.data;
  if (!d || k.ctrl || k.meta || k.alt) return false;
  if (S.ui.reasonFocus && reasonInput()) return reasonKey(k, live);
  if (S.pending) {
    if (/^(Shift|Alt|Control|Meta|CapsLock)$/.test(k.key)) return false;
    S.buffer.push(k);
    return true;
  }
  const letter = letterOf(k);
  if (letter === "F") {  // the other list: flagged works, or disputed ones
    send("filter", { show: d.kind === "flagged" ? "disputed" : "flagged" });
    paintForm(false);
    return true;
  }
  if ((letter === "J" || letter === "K") && d.total > 1) {
    send("move", { step: letter === "J" ? 1 : -1 });
    paintForm(false);
    return true;
  }
  const cur = current();
  if (!cur) return false;
  const dr = cur.draft;
  let used = true;
  const oi = optionIndex(k);
  if (oi !== null) {
    const q = cur.questions[dr.active];
    if (oi < q.labels.length) choose(cur, dr.active, q.labels[oi]);
    else say("info", `${q.name} has no option ${optionKey(oi)}.`);
  } else if (k.key === "ArrowUp" || k.key === "ArrowDown") {
    dr.active = Math.max(0, Math.min(cur.questions.length - 1,
                                     dr.active + (k.key === "ArrowUp" ? -1 : 1)));
  } else if (k.key === "Enter") {
    settle();
  } else if (k.key === "Tab") {
    const input = reasonInput();
    if (input) input.focus();
  } else if (k.key === "Escape") {
    say(null);
  } else {
    const qi = cur.questions.findIndex((q) => q.key && q.key === letter);
    if (qi >= 0) dr.active = qi; else used = false;
  }
  if (used) paintForm(!S.pending);
  return used;
}

function onKeyDown(ev) {
  if (!S.root || !S.root.isConnected || ev.isComposing) return;
  const target = origin(ev);
  if (isTextField(target)) {
    if (target === reasonInput() && ["Escape", "Enter", "Tab"].includes(ev.key)) {
      ev.preventDefault();
      reasonKey(snapshot(ev), true);
    } else if (target.tagName === "SELECT" && ev.key === "Escape") {
      target.blur();
    }
    return;
  }
  if (handle(snapshot(ev), true)) {
    ev.preventDefault();
    ev.stopPropagation();
  }
}

// ---------------------------------------------------------------- painting
function paintTop() {
  const d = S.data;
  const top = el("div", "lf-top");
  const pick = el("select", "lf-campaign");
  pick.title = "Campaign";
  for (const c of d.campaigns) {
    const opt = el("option", null, c.name);
    opt.value = String(c.id);
    opt.selected = c.id === d.campaign;
    pick.appendChild(opt);
  }
  pick.addEventListener("change", () => {
    pick.blur();
    if (!S.pending) send("campaign", { campaign_id: Number(pick.value) });
  });
  const kind = el("select", "lf-campaign af-kind");
  kind.title = "Works listed (F)";
  for (const c of d.kinds) {
    const opt = el("option", null, c.name);
    opt.value = c.id;
    opt.selected = c.id === d.kind;
    kind.appendChild(opt);
  }
  kind.addEventListener("change", () => {
    kind.blur();
    if (!S.pending) send("filter", { show: kind.value });
  });
  add(top, el("span", "lf-muted", "Campaign"), pick, el("span", "lf-muted", "Show (F)"), kind);
  if (d.state === "work") {
    const flagged = d.kind === "flagged";
    const skipped = d.skipped.length ? ` · skipped by ${d.skipped.join(", ")}` : "";
    const status = flagged && d.status ? ` · ${d.status}` : "";
    add(top, el("span", "af-where", `${flagged ? "Flagged" : "Disputed"} work ${d.index + 1} of `
                + `${d.total} · ${d.work_id}${status} · ${d.n_labels} labels${skipped}`));
    for (const f of d.flags) add(top, el("span", "af-note af-flag", `Flagged by ${f}`));
    if (d.note) {
      add(top, el("span", "af-note", flagged ? d.note : `Dispute across campaigns: ${d.note}`));
    }
    add(top, button("lf-btn lf-small-btn", "← Previous (K)", () => {
      if (!S.pending) send("move", { step: -1 }); }));
    add(top, button("lf-btn lf-small-btn", "Next (J) →", () => {
      if (!S.pending) send("move", { step: 1 }); }));
  }
  return top;
}

function sideBySide(d) {
  const table = el("table", "af-table");
  const head = el("tr");
  for (const h of ["Question", ...d.annotators, "Majority"]) head.appendChild(el("th", null, h));
  table.appendChild(add(el("thead"), head));
  const body = el("tbody");
  for (const row of d.rows) {
    const tr = el("tr", row.disagree ? "af-disagree" : null);
    add(tr, el("td", "af-q", row.question), ...row.answers.map((a) => el("td", null, a)),
        el("td", row.majority === d.no_majority ? "af-none" : null, row.majority));
    body.appendChild(tr);
  }
  table.appendChild(body);
  return table;
}

function answerText(q, value, none) {
  if (value == null) return none;
  if (q.kind === "multi") return value.length ? value.join(", ") : "none";
  return value;
}

function paintForm(revealActive) {
  if (!S.parts) return;
  const d = S.data;
  const form = el("div", "lf-form");
  const m = S.ui.msg;
  add(form, el("div", "lf-msg" + (m ? ` lf-${m.kind}` : ""), m ? m.text : ""));
  const cur = current();
  if (!cur) {
    add(form, el("p", "lf-success", d.kind === "flagged" ? "No flagged work here."
      : "No disputed work to adjudicate here."));
  } else {
    add(form, el("div", "lf-label", "Answers side by side"), sideBySide(d),
        el("div", "lf-label af-final", "Final answer (starts from the majority)"));
    const names = d.teachers ? d.teachers.names : [];
    cur.questions.forEach((q, qi) => {
      const active = qi === cur.draft.active;
      const value = cur.draft.answers[q.name];
      const box = el("div", "lf-q" + (active ? " lf-active" : "") + (value == null ? " af-open" : ""));
      box.dataset.q = q.name;
      const head = button("lf-qhead", null, () => { cur.draft.active = qi; paintForm(true); });
      add(head, el("span", "lf-key", q.key || ""), el("span", "lf-prompt", active ? q.prompt
        : q.name), el("span", value == null ? "lf-answer af-none" : "lf-answer",
                      answerText(q, value, d.no_majority)));
      box.appendChild(head);
      if (active) {
        const chosen = new Set(value == null ? [] : (Array.isArray(value) ? value : [value]));
        const teach = d.teachers ? d.teachers.questions[qi] : null;
        q.labels.forEach((lab, i) => box.appendChild(optionRow(q, i, chosen.has(lab), teach,
          names, () => { choose(cur, qi, lab); paintForm(true); })));
      }
      form.appendChild(box);
    });
    const reason = el("input", "lf-note");
    reason.type = "text";
    reason.placeholder = "Reason (required; Tab to write, Enter adjudicates, Esc leaves)";
    reason.value = cur.draft.reason;
    reason.addEventListener("input", () => { cur.draft.reason = reason.value; });
    reason.addEventListener("focus", () => { S.ui.reasonFocus = true; });
    reason.addEventListener("blur", () => { S.ui.reasonFocus = false; });
    const row = el("div", "lf-row");
    row.appendChild(button("lf-btn lf-submit" + (S.pending ? " lf-busy" : ""),
                           S.pending ? "Working…" : "Adjudicate (Enter)", () => {
                             settle(); paintForm(false); }));
    add(form, reason, row, el("div", "lf-keys", "Keys: " + cur.questions.map((q) => q.key)
      .filter(Boolean).join(" ") + " or ↑/↓ question · 1–9, 0, ⇧1… option · Tab reason · "
      + "Enter adjudicate · J next · K previous · F disputed/flagged works"));
  }
  const typing = S.ui.reasonFocus;
  S.parts.form.replaceWith(form);
  S.parts.form = form;
  S.parts.reason = form.querySelector(".lf-note");
  if (typing && S.parts.reason) {  // a render while writing: keep writing, at the end
    const input = S.parts.reason;
    input.focus();
    input.setSelectionRange(input.value.length, input.value.length);
  }
  if (revealActive) reveal(form.querySelector(".lf-q.lf-active"));
}

function paintAll(parentElement) {
  const root = el("div", "lf af");
  const body = el("div", "lf-body");
  const left = S.data.state === "work"
    ? paintCard(S, { retry: () => {}, details: (open) => { S.ui.details = open; } })
    : el("div");
  const form = el("div", "lf-form");
  add(body, left, form);
  add(root, paintTop(), body);
  S.parts = { form, reason: null };
  if (S.root && S.root.parentNode === parentElement) S.root.replaceWith(root);
  else parentElement.appendChild(root);
  S.root = root;
}

function acknowledge(data) {
  const p = S.pending;
  if (!p || data.ack !== p.id) return [];
  S.pending = null;
  const keys = S.buffer;
  S.buffer = [];
  say(data.message ? data.message.kind : null, data.message ? data.message.text : "");
  if (p.kind === "adjudicate" && data.ack_ok && p.key) drafts.delete(p.key);
  if (!data.ack_ok && keys.length) {
    say("error", `${data.message ? data.message.text + " " : ""}${keys.length} key(s) typed `
        + `while waiting were not applied: ${keys.map((k) => k.key).join(" ")}`);
    return [];
  }
  return keys;
}

export default function render({ parentElement, data, setTriggerValue }) {
  S.send = setTriggerValue;
  const settled = S.pending && data.ack === S.pending.id;
  const replay = acknowledge(data);
  if (!settled && data.message) say(data.message.kind, data.message.text);
  S.data = data;
  const key = keyOf(data) || `empty|${data.campaign}`;
  if (key !== S.ui.workKey) {
    S.ui.workKey = key;
    S.ui.details = false;
    S.ui.reasonFocus = false;
  }
  paintAll(parentElement);
  paintForm(false);
  for (const k of replay) handle(k, false);
  return listen(holder, onKeyDown);
}
