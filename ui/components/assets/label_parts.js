// The label form's pieces, painted from the server's data and the draft (text only).
import { add, button, el, link, optionKey } from "./common.js";

const CONF = [[1, "L", "low"], [2, "M", "medium"], [3, "H", "high"]];

// ---------------------------------------------------------------- the card (left column)
function facts(card) {
  const line = el("div", "lf-facts");
  const parts = [...card.facts.map((f) => el("span", null, f)),
                 ...card.links.map((l) => link(l.text, l.href)),
                 el("span", card.retracted ? "lf-retracted" : "lf-muted", card.retraction)];
  parts.forEach((p, i) => { if (i) line.appendChild(el("span", "lf-sep", " · ")); line.appendChild(p); });
  return line;
}

function lists(card) {
  const box = el("div", "lf-lists");
  if (card.routes.length) {
    const row = add(el("div", "lf-list"), el("b", null, "Routes: "));
    for (const [name, on] of card.routes) {
      row.appendChild(el("span", on ? "lf-badge lf-route-on" : "lf-badge", `${on ? "✓" : "✗"} ${name}`));
    }
    box.appendChild(row);
  }
  for (const [what, values] of card.lists) {
    const row = add(el("div", "lf-list lf-clamp"), el("b", null, `${what}: `),
                    el("span", null, values.join(" · ")));
    row.title = "Click to show all";
    row.addEventListener("click", () => row.classList.toggle("lf-clamp"));
    box.appendChild(row);
  }
  return box;
}

function abstractBox(card, api) {
  const a = card.abstract;
  const box = el("div", "lf-abstract");
  add(box, el("div", "lf-label", `Abstract · ${card.work_id}`));
  if (a.state === "ok") {
    add(box, el("div", "lf-abstract-text", a.text));
  } else {
    add(box, el("div", "lf-warning", a.message));
    if (a.retry) add(box, button("lf-btn", "Try the abstract again (A)", api.retry));
  }
  return box;
}

function table(t) {
  const wrap = el("div", "lf-table");
  const head = t.notes.map((n) => el("div", "lf-warning", `Inconsistent record: ${n}`));
  add(wrap, el("div", "lf-table-name", `${t.name} — ${t.summary}`), ...head);
  const tbl = el("table");
  const tr = el("tr");
  for (const h of t.head) tr.appendChild(el("th", null, h));
  tbl.appendChild(add(el("thead"), tr));
  const body = el("tbody");
  for (const row of t.rows) {
    const r = el("tr");
    for (const cell of row) r.appendChild(el("td", null, cell));
    body.appendChild(r);
  }
  tbl.appendChild(body);
  return add(wrap, tbl);
}

/** "How this classification was reached": the machine's status, scores and full tables. */
export function detailsBody(details) {
  const body = el("div", "lf-details-body");
  add(body, el("div", "lf-muted", details.status), el("div", "lf-small", details.notice),
      details.terms ? el("div", "lf-small lf-terms", details.terms) : null);
  const m = details.machine;
  if (m) {
    add(body, el("div", null, `Machine scores (${m.flags}): ${m.scores}`),
        el("div", "lf-small", `${details.rank}${m.note ? " " + m.note : ""}`),
        add(el("div", null, "Validation status, verbatim: "), el("code", null, m.validation_status)));
  }
  for (const t of details.tables) body.appendChild(table(t));
  return body;
}

/** A fold whose content is built when first opened (the full tables are hundreds of cells:
 *  building them with every work would slow each new work's first paint). */
function detailsBox(title, details, open, onToggle) {
  const box = el("details", "lf-details");
  box.appendChild(el("summary", null, title));
  const fill = () => {
    if (box.childNodes.length === 1) box.appendChild(detailsBody(details));
  };
  box.addEventListener("toggle", () => {
    if (box.open) fill();
    if (onToggle) onToggle(box.open);
  });
  if (open) { fill(); box.open = true; }
  return box;
}

/** Blind campaigns: the label just submitted beside the machines' picks, at the top of the
 *  form (in view at once, next to "Saved"); the full tables behind their own fold. */
export function paintFeedback(S, api) {
  const fb = S.data.feedback;
  const box = el("details", "lf-details lf-feedback");
  box.open = S.ui.feedbackOpen;
  box.addEventListener("toggle", () => api.feedbackOpen(box.open));
  add(box, el("summary", null, `Your last label (${fb.work_id}) beside the machines' picks`),
      el("div", "lf-strong lf-clamp", fb.title));
  if (fb.skipped) box.appendChild(el("div", null, `You skipped it: ${fb.skipped}.`));
  for (const q of fb.teachers.questions) {
    const split = q.agreement === "disagree";
    const mine = fb.skipped ? "" : `you: ${fb.yours[q.name] ?? "—"} · `;
    add(box, el("div", "lf-fb-line" + (split ? " lf-split-line" : ""),
                `${split ? "⚠ " : ""}${q.name} — ${mine}${q.calls.join(" · ")}`));
  }
  box.appendChild(detailsBox("How this classification was reached", fb.details,
                             S.ui.feedbackDetails, api.feedbackDetails));
  return box;
}

/** The left column: title, bibliographic line, abstract, the machine's view behind a fold. */
export function paintCard(S, api) {
  const d = S.data;
  const col = el("div", "lf-card");
  if (d.state === "work") {
    const card = d.card;
    add(col, el("div", "lf-title", card.title), facts(card), lists(card), abstractBox(card, api));
    if (d.teachers) {
      col.appendChild(el("div", "lf-legend", d.teachers.legend));
      col.appendChild(detailsBox("How this classification was reached", d.details,
                                 S.ui.details, api.details));
    } else if (d.blind) {
      col.appendChild(el("div", "lf-info", "Blind: machine scores stay hidden until "
                                           + "you submit your label."));
    }
  }
  return col;
}

// ---------------------------------------------------------------- the questions (right column)
function answerText(q, value) {
  if (q.kind === "multi") return value && value.length ? value.join(", ") : "none";
  return value == null ? "—" : value;
}

function codebook(q) {
  const box = el("div", "lf-codebook");
  add(box, el("div", null, q.definition || "No definition."));
  q.labels.forEach((lab, i) => {
    if (q.label_definitions[i]) {
      add(box, add(el("div"), el("i", null, `${lab}: `), el("span", null, q.label_definitions[i])));
    }
  });
  return box;
}

export function optionRow(q, i, chosen, teach, names, onPick) {
  const lab = q.labels[i];
  const row = button("lf-opt" + (chosen ? " lf-chosen" : ""), null, onPick,
                     q.label_definitions[i] || null);
  add(row, el("span", "lf-key", optionKey(i)), el("span", "lf-mark", chosen ? "✔" : ""),
      el("span", "lf-opt-label", lab));
  const t = teach && teach.rows[i];
  if (t) {
    if (t.split) row.classList.add("lf-split");
    t.scores.forEach((score, j) => {
      const cell = el("span", "lf-score" + (t.called[j] ? " lf-called" : ""));
      cell.title = names[j];
      if (score !== null && score !== "—") {
        const bar = el("span", "lf-mini");
        bar.style.width = `${Math.round(Math.max(0, Math.min(1, Number(score))) * 100)}%`;
        cell.appendChild(bar);
      }
      add(cell, el("span", null, `${score ?? ""}${t.called[j] ? " ✔" : ""}`));
      row.appendChild(cell);
    });
  }
  return row;
}

/** Every question: the active one with its options (and both teachers' scores), the others
 *  as one line with the answer given. */
export function paintQuestions(S, cur, api) {
  const d = S.data;
  const names = d.teachers ? d.teachers.names : [];
  return cur.questions.map((q, qi) => {
    const active = qi === cur.draft.active;
    const value = cur.draft.answers[q.name];
    const teach = d.teachers ? d.teachers.questions[qi] : null;
    const box = el("div", "lf-q" + (active ? " lf-active" : ""));
    box.dataset.q = q.name;
    const head = button("lf-qhead", null, () => api.activate(qi), q.definition || null);
    add(head, el("span", "lf-key", q.key || ""),
        el("span", "lf-prompt", active ? q.prompt : q.name));
    if (teach && teach.agreement === "disagree") {
      const warn = el("span", "lf-warn", "⚠");
      warn.title = "The two models pick differently on this question";
      head.appendChild(warn);
    }
    if (!active) {
      head.appendChild(el("span", value == null ? "lf-answer lf-none" : "lf-answer",
                          answerText(q, value)));
      return add(box, head);
    }
    add(box, head);
    if (S.ui.codebook) box.appendChild(codebook(q));
    if (teach) {
      const cols = add(el("div", "lf-cols"), el("span"), el("span"), el("span"));
      for (const n of names) cols.appendChild(el("span", "lf-score", n));
      box.appendChild(cols);
    }
    const chosen = q.kind === "multi" ? new Set(value || []) : new Set(value == null ? [] : [value]);
    q.labels.forEach((lab, i) => {
      box.appendChild(optionRow(q, i, chosen.has(lab), teach, names, () => api.choose(qi, lab)));
    });
    if (teach) {
      box.appendChild(el("div", "lf-reading" + (teach.agreement === "disagree" ? " lf-split-line"
        : ""), `${teach.agreement === "disagree" ? "⚠ " : ""}${teach.agreement_text} · `
        + teach.reading));
      for (const n of teach.notes) box.appendChild(el("div", "lf-warning", `Inconsistent record: ${n}`));
    }
    return box;
  });
}

// ---------------------------------------------------------------- confidence, flag, note, submit
export function paintActions(S, cur, api) {
  const d = S.data;
  const draft = cur.draft;
  const box = el("div", "lf-actions");
  if (d.editing) {
    const banner = el("div", "lf-editing", `Editing your label on ${d.work_id} (version `
      + `${d.editing.version}); saving writes a new version. N returns to the queue.`);
    add(box, add(banner, button("lf-btn", "Back to the queue (N)", api.resume)));
  }
  const note = el("input", "lf-note");
  note.type = "text";
  note.placeholder = "Note (Tab to write, Esc or Enter to leave)";
  note.value = draft.note;
  note.addEventListener("input", () => api.noteInput(note.value));
  note.addEventListener("focus", () => api.noteFocus(true));
  note.addEventListener("blur", () => api.noteFocus(false));
  box.appendChild(note);
  const row = el("div", "lf-row");
  const label = S.pending ? "Saving…" : (d.editing ? "Save new version (Enter)"
    : "Submit label (Enter)");
  row.appendChild(button("lf-btn lf-submit" + (S.pending ? " lf-busy" : ""), label,
                         () => api.submit(null)));
  for (const [v, key, name] of CONF) {
    row.appendChild(button("lf-btn lf-small-btn" + (draft.confidence === v ? " lf-on" : ""),
                           `${name} (${key})`, () => api.toggleConf(v)));
  }
  row.appendChild(button("lf-btn lf-small-btn" + (draft.flagged ? " lf-on" : ""),
                         draft.flagged ? "⚑ Flagged (F)" : "⚑ Flag (F)", api.toggleFlag,
                         "Flag the work for a lead"));
  row.appendChild(button("lf-btn lf-small-btn" + (S.ui.codebook ? " lf-on" : ""),
                         "Definitions (D)", api.toggleCodebook, "The active question's codebook"));
  row.appendChild(button("lf-btn lf-small-btn", "Edit previous (B)", api.back));
  box.appendChild(row);
  const skips = el("div", "lf-row");
  d.skip.forEach((s, i) => {
    skips.appendChild(button("lf-btn lf-skip", `Skip: ${s.text} (Alt+${i + 1})`,
                             () => api.submit(s.reason)));
  });
  box.appendChild(skips);
  const keys = cur.questions.map((q) => q.key).filter(Boolean).join(" ");
  box.appendChild(el("div", "lf-keys", `Keys: ${keys} or ↑/↓ question · 1–9, 0, ⇧1… option · `
    + "L/M/H confidence · F flag · D definitions · Tab note · Enter submit · Alt+1–4 skip · "
    + "B edit previous · PgDn/PgUp, Space, End/Home scroll the abstract"));
  return box;
}
