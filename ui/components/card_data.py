"""The work card as JSON for the client-side components (text only: the browser sets it as text).

Shared by the label and adjudicate forms. Nothing here is HTML or Markdown: every string is
put into the page with textContent, and links are only the https:// URLs card.py builds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from labeling.abstracts.cache import AbstractState
from labeling.review.card import (
    PLAIN_AGREEMENT,
    PLAIN_LEGEND,
    PREDICTION_NOTICE,
    SCORES_RANK,
    TERMS,
    QuestionScores,
    WorkCard,
    fmt_score,
    plain_reading,
)
from labeling.schema import Question

# Said once on every card that shows scores, in plain words (the precise terms: TERMS).
MODELS_LEGEND = PLAIN_LEGEND
RETRY_STATES = ("error", "offline", "pending")


def _link(text: str, href: str | None) -> dict[str, str] | None:
    return {"text": text, "href": href} if href and href.startswith("https://") else None


def card_data(card: WorkCard, abstract: AbstractState | None) -> dict[str, Any]:
    """Title, bibliographic line, links, routes, lists, retraction and the abstract's state."""
    facts = [
        str(card.year) if card.year else None,
        card.type,
        card.venue,
        card.lang,
        card.field,
        card.topic,
        f"cited by {card.cited_by}" if card.cited_by else None,
    ]
    links = [
        _link(f"OpenAlex {card.work_id}", card.openalex_url),
        _link(f"DOI {card.doi}", card.doi_url),
    ]
    state = abstract.state if abstract is not None else "pending"
    message = abstract.message if abstract is not None else "No abstract state."
    if state != "ok" and card.has_abstract is None:
        message += " The record does not say if it has one."
    return {
        "work_id": card.work_id,
        "title": card.title,
        "facts": [f for f in facts if f],
        "links": [link for link in links if link],
        "retraction": card.retraction_state,
        "retracted": bool(card.is_retracted),
        "routes": [[name, on] for name, on in card.routes],
        "lists": [
            [what, list(values)]
            for what, values in (
                ("Institutions", card.institutions),
                ("Funders", card.funders),
                ("Keywords", card.keywords),
            )
            if values
        ],
        "abstract": {
            "state": state,
            "text": abstract.text if abstract is not None and state == "ok" else None,
            "message": "" if state == "ok" else message,
            "retry": state in RETRY_STATES,
        },
    }


def _rows(qs: QuestionScores, labels: Sequence[str]) -> list[dict[str, Any]]:
    """One row per option: each teacher's score and call; "split" when their calls differ."""
    by_label = {row.label: row for row in qs.rows}
    out = []
    for lab in labels:
        row = by_label.get(lab)
        if row is None and qs.kind == "binary" and lab == "no":  # calls of "no" mirror "yes"
            yes = by_label.get("yes")
            known = yes is not None and all(s is not None for s in yes.scores)
            called = [known and not c for c in yes.called] if yes else [False] * len(qs.teachers)
            out.append(
                {
                    "label": lab,
                    "scores": [None] * len(qs.teachers),
                    "called": called,
                    "split": known and len(set(called)) > 1,
                }
            )
            continue
        if row is None:
            out.append(
                {
                    "label": lab,
                    "scores": [None] * len(qs.teachers),
                    "called": [False] * len(qs.teachers),
                    "split": False,
                }
            )
            continue
        out.append(
            {
                "label": lab,
                "scores": [fmt_score(s) for s in row.scores],
                "called": list(row.called),
                "split": row.agreement == "split",
            }
        )
    return out


def teachers_data(card: WorkCard, questions: Sequence[Question]) -> dict[str, Any]:
    """The condensed side-by-side view: per question, both teachers' scores for each label."""
    names = list(card.questions[0].teachers) if card.questions else []
    return {
        "names": names,
        "legend": MODELS_LEGEND,
        "questions": [
            {
                "name": qs.name,
                "agreement": qs.agreement,
                "agreement_text": PLAIN_AGREEMENT.get(qs.agreement, PLAIN_AGREEMENT["unknown"]),
                "reading": plain_reading(qs),
                "calls": [f"{t}: {c}" for t, c in zip(qs.teachers, qs.calls, strict=True)],
                "rows": _rows(qs, q.labels),
                "notes": list(qs.notes),
            }
            for qs, q in zip(card.questions, questions, strict=True)
        ],
    }


def score_table(qs: QuestionScores) -> dict[str, Any]:
    """The full score table of one question (the expander's content)."""
    mark = {"both": "✔ both", "split": "⚠ split", "neither": "·"}
    rows = []
    for row in qs.rows:
        cells = [row.label]
        for score, called, top in zip(row.scores, row.called, row.top, strict=True):
            cells.append(fmt_score(score) + (" ✔" if called else (" ▲" if top else "")))
        cells += [
            "✔" if row.candidate else "",
            "✔" if row.consensus else "",
            mark.get(row.agreement, ""),
        ]
        rows.append(cells)
    return {
        "name": qs.name,
        "summary": qs.summary,
        "notes": list(qs.notes),
        "head": ["Label", *qs.teachers, "Cand.", "Cons.", "Agreement"],
        "rows": rows,
    }


def details_data(card: WorkCard) -> dict[str, Any]:
    """ "How this classification was reached": status, machine scores, full tables, notices."""
    ms = card.machine
    machine = None
    if ms is not None:
        machine = {
            "flags": ", ".join(ms.flags) or "no flags",
            "scores": (
                f"score_opus {fmt_score(ms.score_opus)} · score_gpt "
                f"{fmt_score(ms.score_gpt)} · spread {fmt_score(ms.score_spread)} · "
                f"teacher disagreement {fmt_score(card.teacher_disagreement)} · "
                f"threshold uncertainty {fmt_score(card.threshold_uncertainty)}"
            ),
            "note": ms.note or "",
            "validation_status": ms.validation_status or "(none)",
        }
    return {
        "status": f"{card.prediction_status or 'status unknown'} · model "
        f"{card.model_version or '?'}",
        "notice": PREDICTION_NOTICE,
        "terms": TERMS,
        "rank": SCORES_RANK,
        "machine": machine,
        "tables": [score_table(qs) for qs in card.questions],
    }


def questions_data(questions: Sequence[Question], keys: Sequence[str | None]) -> list[dict]:
    """The questions as the form shows them: prompt, kind, labels, key, codebook."""
    return [
        {
            "name": q.name,
            "prompt": q.prompt or q.name,
            "kind": q.kind,
            "key": key,
            "labels": list(q.labels),
            "definition": q.definition or "",
            "label_definitions": [q.definition_of(lab) or "" for lab in q.labels],
        }
        for q, key in zip(questions, keys, strict=True)
    ]
