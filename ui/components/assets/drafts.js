// Unsaved answers kept in the browser (localStorage), so that a reload does not lose them.
// One entry per (user, campaign, work) of the queue: written on every change, removed on
// submit and on sign-out, and only ever read back for that same work (its key and its
// content both name it). Entries older than MAX_AGE_MS are dropped: their lease is long gone.
// localStorage may be off or full: the draft then lives in the page's memory only.

const PREFIX = "labeling.draft|";
const MAX_AGE_MS = 7 * 24 * 3600 * 1000;

function storage() {
  try { return window.localStorage; } catch (e) { return null; }
}

/** The storage key of a queue work's draft; null for anything else (an edit, no work). */
export function storedKey(ctx) {
  if (!ctx || ctx.mode !== "queue" || ctx.work == null) return null;
  return PREFIX + [ctx.user, ctx.campaign, ctx.work].join("|");
}

/** The stored draft of exactly this work, or null. */
export function loadDraft(ctx) {
  const key = storedKey(ctx);
  const ls = storage();
  if (!key || !ls) return null;
  try {
    const v = JSON.parse(ls.getItem(key));
    const fresh = v && typeof v.saved === "number" && Date.now() - v.saved < MAX_AGE_MS;
    return fresh && v.work === ctx.work && v.campaign === ctx.campaign && v.user === ctx.user
      ? v : null;
  } catch (e) {
    return null;
  }
}

function blank(d) {
  const answered = Object.values(d.answers || {}).some(
    (v) => (Array.isArray(v) ? v.length > 0 : v != null));
  return !answered && d.confidence == null && !d.flagged && !d.note;
}

/** Keep a work's draft (an untouched one is not kept); spentMs is the time on it so far. */
export function saveDraft(ctx, d, spentMs) {
  const key = storedKey(ctx);
  const ls = storage();
  if (!key || !ls) return;
  try {
    if (blank(d)) { ls.removeItem(key); return; }
    ls.setItem(key, JSON.stringify({
      user: ctx.user, campaign: ctx.campaign, work: ctx.work, saved: Date.now(),
      spent: Math.max(0, Math.round(spentMs)), answers: d.answers, confidence: d.confidence,
      flagged: !!d.flagged, note: d.note || "", active: d.active || 0,
    }));
  } catch (e) { /* full or off: kept in memory only */ }
}

/** Forget a work's draft (it was submitted). */
export function dropDraft(ctx) {
  const key = storedKey(ctx);
  const ls = storage();
  if (key && ls) { try { ls.removeItem(key); } catch (e) { /* nothing kept */ } }
}

function keys(ls) {
  const out = [];
  for (let i = 0; i < ls.length; i += 1) {
    const k = ls.key(i);
    if (k && k.startsWith(PREFIX)) out.push(k);
  }
  return out;
}

/** Forget every draft of a user (they signed out). */
export function dropDraftsOf(user) {
  const ls = storage();
  if (!ls) return;
  try {
    for (const k of keys(ls)) if (k.startsWith(`${PREFIX}${user}|`)) ls.removeItem(k);
  } catch (e) { /* nothing kept */ }
}

/** Forget drafts older than MAX_AGE_MS, and any entry that cannot be read. */
export function pruneDrafts() {
  const ls = storage();
  if (!ls) return;
  try {
    for (const k of keys(ls)) {
      let v = null;
      try { v = JSON.parse(ls.getItem(k)); } catch (e) { v = null; }
      if (!v || typeof v.saved !== "number" || Date.now() - v.saved >= MAX_AGE_MS) ls.removeItem(k);
    }
  } catch (e) { /* nothing kept */ }
}
