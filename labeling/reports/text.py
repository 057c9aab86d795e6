"""Plain-text renderings of the reports for the CLI: lines of at most about 120 characters."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

# The width prose is wrapped to; table rows are laid out to stay within it.
WIDTH = 120


def wrap(text: str, indent: str = "") -> list[str]:
    """A sentence or paragraph as lines of at most WIDTH characters (a long word kept whole)."""
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=indent,
        subsequent_indent=indent + "  ",
        break_long_words=False,
        break_on_hyphens=False,
    ) or [indent]


def wrap_clauses(text: str, sep: str = ", ") -> list[str]:
    """A list-like sentence ("3 rows, 2 imported, ...") as lines of at most WIDTH characters,
    broken only between its clauses, so that each clause ("2 campaigns created") stays whole."""
    lines: list[str] = []
    line = ""
    for clause in text.split(sep):
        if line and len(line) + len(sep) + len(clause) > WIDTH:
            lines.append(line + sep.rstrip())
            line = "  " + clause
        else:
            line = f"{line}{sep}{clause}" if line else clause
    lines.append(line)
    # A clause longer than a line (two long paths) is broken between its words.
    return [part for line in lines for part in (wrap(line) if len(line) > WIDTH else [line])]


def num(v: float | None, digits: int = 3) -> str:
    """A number, or `-` when undefined."""
    return "-" if v is None else f"{v:.{digits}f}"


def interval(e: Mapping[str, Any] | None, digits: int = 3) -> str:
    """An estimate with its 95% interval and n, e.g. `0.333 [0.097, 0.700] n=6`; `-` if none."""
    e = e or {}
    n = e.get("n")
    tail = "" if n is None else f" n={n}"
    if e.get("estimate") is None:
        return f"-{tail}"
    if e.get("lo") is None or e.get("hi") is None:
        return f"{e['estimate']:.{digits}f}{tail}"
    return f"{e['estimate']:.{digits}f} [{e['lo']:.{digits}f}, {e['hi']:.{digits}f}]{tail}"


def estimate_lines(report: Mapping[str, Any]) -> list[str]:
    """`labeling estimates`: prevalence per label, then each system's precision and recall."""
    if not report["estimable"]:
        return wrap(f"{report['campaign']}: {report['reason']}")
    lines = wrap(
        f"{report['campaign']}: frame of {report['population']} works, "
        f"{report['n_validated']} of {report['n_sampled']} sampled works validated "
        f"({report['assumption']})"
    )
    if not report["n_validated"]:
        lines.append("no sampled work is validated yet: nothing to estimate")
        return lines
    lines.append("")
    lines.append(f"  {'question / label':40} {'prevalence in the frame (95% CI), n':36} method")
    for qname, q in report["questions"].items():
        if not q.get("n"):
            lines.append(f"{qname}: no validated answers in the sample yet")
            continue
        lines.append(f"{qname} ({q['n']} validated works of the sample)")
        for label, e in q["labels"].items():
            o = e.get("overall") or {}
            lines.append(f"  {label[:40]:40} {interval(o):36} {o.get('method') or ''}".rstrip())
    lines.extend(_frame_systems(report))
    return lines


def _frame_systems(report: Mapping[str, Any]) -> list[str]:
    """Each system's precision and recall in the frame, per label it has a number for."""
    lines = ["", "precision and recall in the frame (design-based, 95% CI, n = sampled works):"]
    lines.append(f"  {'question / label':40} {'system':14} {'precision':28} recall")
    for qname, q in report["questions"].items():
        if not q.get("n"):
            continue
        lines.append(qname)
        without: list[str] = []  # labels no system has a number for, said together
        for label, e in q["labels"].items():
            rows = []
            for system, s in (e.get("systems") or {}).items():
                p, r = s.get("precision") or {}, s.get("recall") or {}
                if p.get("estimate") is None and r.get("estimate") is None:
                    continue
                rows.append(f"{system[:14]:14} {interval(p):28} {interval(r)}")
            if not rows:
                without.append(label)
                continue
            lines.append(f"  {label[:40]:40} {rows[0]}")
            lines.extend(f"  {'':40} {row}" for row in rows[1:])
        if without:
            lines.extend(wrap(f"no system has a number yet for: {', '.join(without)}", "  "))
    return lines


def machine_lines(report: Mapping[str, Any]) -> list[str]:
    """`labeling machines`: per question, label and system precision, recall and F1 with n.

    The confusion matrices and reliability bins stay in --json; the calibration is summed up
    by each teacher's Brier score per question.
    """
    where = f"campaign {report['campaign']}" if report.get("campaign") else "every campaign"
    lines = wrap(
        f"humans vs machines on {report['n_works']} validated works ({where}): each "
        f"teacher's call ({', '.join(report['teachers'])}), the candidate (their union), the "
        "consensus (their intersection) and each teacher's scores at the threshold; 95% "
        "Wilson intervals; n: the works the system calls (precision) or that truly have "
        "the label (recall)"
    )
    if not report["n_works"]:
        lines.append("no validated works yet: nothing to compare")
        return lines
    head = f"  {'label':34} {'system':14} {'precision':26} {'recall':26} {'F1':>6}"
    for qname, q in report["questions"].items():
        lines.append("")
        lines.extend(_question_head(qname, q))
        lines.append(head)
        labels: dict[str, list[str]] = {}
        for system, s in (q.get("systems") or {}).items():
            for label, m in (s.get("labels") or {}).items():
                labels.setdefault(label, []).append(
                    f"{system[:14]:14} {interval(m.get('precision')):26} "
                    f"{interval(m.get('recall')):26} {num(m.get('f1')):>6}"
                )
        for label, rows in labels.items():
            lines.append(f"  {label[:34]:34} {rows[0]}")
            lines.extend(f"  {'':34} {row}" for row in rows[1:])
    lines.extend(_machine_scores(report.get("machine_scores")))
    lines.append("")
    lines.append("(confusion matrices and reliability bins: --json)")
    return lines


def _question_head(qname: str, q: Mapping[str, Any]) -> list[str]:
    """A question's heading: its kind, works, each system's accuracy and each teacher's Brier."""
    lines = [f"{qname} ({q.get('kind')}, {q.get('n_works')} works)"]
    accuracy = [
        f"{system} {interval(s['accuracy'])}"
        for system, s in (q.get("systems") or {}).items()
        if s.get("accuracy")
    ]
    if accuracy:
        lines.extend(wrap("accuracy: " + "; ".join(accuracy), "  "))
    brier = [
        f"{teacher} {num((cal.get('pooled') or {}).get('brier'))} "
        f"(n={(cal.get('pooled') or {}).get('n', 0)})"
        for teacher, cal in (q.get("calibration") or {}).items()
    ]
    if brier:
        lines.extend(
            wrap("Brier score of the scores, all labels pooled: " + "; ".join(brier), "  ")
        )
    return lines


def _machine_scores(ms: Mapping[str, Any] | None) -> list[str]:
    """The machine scores (score_opus, ...) against whether a question got any label."""
    if not ms or not ms.get("scores"):
        return []
    lines = ["", f"machine scores against {ms.get('target')}:"]
    for name, s in ms["scores"].items():
        lines.append(
            f"  {name:16} AUC {num(s.get('auc')):>6}  Brier {num(s.get('brier')):>6}  "
            f"n={s.get('n', 0)}, {s.get('positives', 0)} positive"
        )
    return lines


def plan_lines(report: Mapping[str, Any], sentence: str) -> list[str]:
    """`labeling plan`: the headline sentence, the strata once, then one row per label.

    Labels whose plan is the same (before any label, every prevalence is planned alike) are
    said once, not row after row.
    """
    lines = wrap(sentence)
    plans = report["plans"]
    if not plans:
        return lines
    strata = [r["stratum"] for r in plans[0]["strata"]]
    lines.append("")
    lines.append("strata (N works in the frame, n labelled now):")
    for i, r in enumerate(plans[0]["strata"], 1):
        lines.append(f"  s{i}  {r['stratum']}  N={r['N']}, n={r['n']}")
    notes = {p["note"] for p in plans if p.get("note")}
    for note in sorted(notes):
        lines.extend(wrap(f"({note})"))
    lines.append("")
    cells = "".join(f"{'s' + str(i):>6}" for i in range(1, len(strata) + 1))
    lines.append(f"  {'question / label':44} {'now +-':>7} {'more':>6}  {'beyond':>6}  {cells}")

    def row(p: Mapping[str, Any]) -> str:
        per = "".join(f"{r['more']:6d}" for r in p["strata"])
        return (
            f"{num(p['half_width_now']):>7} {p['more']:6d}  {p.get('beyond_sample', 0):6d}  {per}"
        )

    distinct = {row(p) for p in plans}
    if len(plans) > 1 and len(distinct) == 1:
        what = "label" if report["measure"] == "prevalence" else f"{report['measure']}"
        lines.append(f"  {f'every {what} ({len(plans)}) alike':44} {row(plans[0])}")
        return lines
    for p in plans:
        title = f"{p['question']}: {p['label']}"
        lines.append(f"  {title[:44]:44} {row(p)}")
    return lines
