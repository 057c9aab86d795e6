"""The work card as plain data: what the label page shows for one work, built from its record."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from labeling.review.links import doi_link, openalex_link
from labeling.schema import Question, Schema, get_path

# The wording of the current system's page (seeds/003): scores rank, they never assert.
SCORES_RANK = (
    "The two teacher heads of the student model, read on this work. A score orders the frame "
    "for review; it never asserts a category, and the validation status ships verbatim with "
    "every row."
)
PREDICTION_NOTICE = (
    "Teacher imitation: not calibrated prevalence, not ground truth. Human validation pending. "
    "Candidate is the union of thresholded teacher heads; consensus is their intersection. "
    "These outputs are machine predictions, not human labels."
)
AGREE, DISAGREE, UNKNOWN = "agree", "disagree", "unknown"

# What the label page says beside the scores, in words a newcomer reads at once; the precise
# terms (teacher, student model, head, call, candidate, consensus, maturity gate) are in TERMS,
# behind "How this classification was reached".
PLAIN_LEGEND = (
    "Machine guesses, not answers. The Codex and Gemma columns show how strongly a machine "
    "reading of this work points to each option (0 to 1), in the manner of two AI models, "
    "Codex and Gemma; ✔ marks the option each would pick, and ⚠ a question where the two "
    "pick differently. Decide from the work itself. Precise terms: "
    '"How this classification was reached".'
)
PLAIN_AGREEMENT = {
    AGREE: "both models pick the same",
    DISAGREE: "the two models pick differently",
    UNKNOWN: "cannot compare: a model made no pick",
}
TERMS = (
    "Precise terms. Teachers: Codex and Gemma, two frontier language models that labelled "
    "about 10,000 works directly. Student model: a smaller model distilled from them that "
    "scored the whole frame, with one head per teacher; the Codex and Gemma columns are those "
    "two heads' scores, and ✔ a head's call (its score at or above the question's threshold; "
    'for a single-choice question, the head\'s own call). Candidate ("picked by either"): '
    'the union of the two heads\' calls; consensus ("picked by both"): their intersection. '
    "score_opus and score_gpt: the student's two teacher heads read on the whole work; they "
    "order the review queue. Maturity gate: the student model's readiness check; \"not "
    'passed" means an immature baseline whose scores are provisional.'
)


def plain_reading(qs: QuestionScores) -> str:
    """The candidate and consensus of a question in plain words."""
    return f"picked by either model: {qs.candidate} · by both: {qs.consensus}"


@dataclass(frozen=True)
class ScoreRow:
    """One label of a question: each teacher's score and call, candidate, consensus, agreement."""

    label: str
    scores: tuple[float | None, ...]
    called: tuple[bool, ...]
    top: tuple[bool, ...]
    candidate: bool
    consensus: bool
    agreement: str  # "both" | "neither" | "split" ("" for single-choice labels nobody called)
    definition: str = ""


@dataclass(frozen=True)
class QuestionScores:
    """A question's machine view: a compact score table and its one-line reading."""

    name: str
    kind: str
    prompt: str
    threshold: float
    teachers: tuple[str, ...]
    rows: tuple[ScoreRow, ...]
    calls: tuple[str, ...]
    candidate: str
    consensus: str
    agreement: str  # AGREE | DISAGREE | UNKNOWN (teachers' calls compared)
    notes: tuple[str, ...] = ()

    @property
    def reading(self) -> str:
        """One line: each teacher's call, the candidate and the consensus."""
        calls = " · ".join(f"{t}: {c}" for t, c in zip(self.teachers, self.calls, strict=True))
        return f"{calls} · candidate: {self.candidate} · consensus: {self.consensus}"

    @property
    def summary(self) -> str:
        """The reading and whether the teachers agree."""
        mark = {AGREE: "teachers agree", DISAGREE: "teachers disagree"}.get(
            self.agreement, "agreement unknown"
        )
        return f"{self.reading} — {mark}"


@dataclass(frozen=True)
class MachineScores:
    """The record's machine_scores block, flags and validation status verbatim."""

    score_opus: float | None
    score_gpt: float | None
    score_spread: float | None
    provisional: bool | None
    baseline: bool | None
    maturity_gate_passed: bool | None
    validation_status: str | None
    note: str | None

    @property
    def flags(self) -> tuple[str, ...]:
        """The status flags that are set, in words."""
        gate: dict[bool | None, str] = {
            True: "maturity gate passed",
            False: "maturity gate not passed",
        }
        return tuple(
            f
            for f in (
                "provisional" if self.provisional else None,
                "baseline" if self.baseline else None,
                gate.get(self.maturity_gate_passed),
            )
            if f
        )


@dataclass(frozen=True)
class WorkCard:
    """Everything the card shows for one work; text fields are raw (render them as plain text)."""

    work_id: str
    title: str
    year: int | None
    type: str | None
    venue: str | None
    lang: str | None
    topic: str | None
    field: str | None
    cited_by: int | None
    doi: str | None
    doi_url: str | None
    openalex_url: str | None
    keywords: tuple[str, ...]
    institutions: tuple[str, ...]
    funders: tuple[str, ...]
    routes: tuple[tuple[str, bool], ...]
    is_retracted: bool | None
    retraction: str | None
    has_abstract: bool | None
    model_version: str | None
    prediction_status: str | None
    teacher_disagreement: float | None
    threshold_uncertainty: float | None
    questions: tuple[QuestionScores, ...]
    machine: MachineScores | None

    @property
    def retraction_state(self) -> str:
        """Retraction in words: retracted (with details), not retracted, or unknown."""
        if self.is_retracted:
            return f"Retracted: {self.retraction}" if self.retraction else "Retracted"
        if self.retraction:
            return f"Retraction notice: {self.retraction}"
        return "Not retracted" if self.is_retracted is False else "Retraction state unknown"

    @property
    def disagreements(self) -> tuple[str, ...]:
        """Names of the questions on which the teachers' calls differ."""
        return tuple(q.name for q in self.questions if q.agreement == DISAGREE)


def fmt_score(value: float | None) -> str:
    """A score with three decimals, or an em dash when missing."""
    return "—" if value is None else f"{value:.3f}"


def teacher_name(teacher: str) -> str:
    """Display name of a teacher ("codex" -> "Codex")."""
    return teacher[:1].upper() + teacher[1:]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _text(value: Any) -> str | None:
    return None if value is None else (str(value).strip() or None)


def _split(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, list | tuple):
        parts = [str(v) for v in value]
    else:
        parts = str(value).split(";")
    return tuple(dict.fromkeys(p.strip() for p in parts if p and p.strip()))


def _retraction(value: Any) -> str | None:
    if value in (None, "", {}, []):
        return None
    if isinstance(value, dict):
        return "; ".join(f"{k}: {v}" for k, v in value.items() if v not in (None, ""))
    return str(value)


def _vector(record: dict[str, Any], path: str | None, n: int) -> list[float | None]:
    raw = get_path(record, path) if path else None
    if not isinstance(raw, list) or len(raw) != n:
        return [None] * n
    return [_number(v) for v in raw]


def _yes_no(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("yes", "no"):
        return value.strip().lower() == "yes"
    return None


def _row_agreement(called: Sequence[bool], scores: Sequence[float | None]) -> str:
    if any(v is None for v in scores):
        return ""
    return "both" if all(called) else ("split" if any(called) else "neither")


def _agreement(calls: Sequence[Any]) -> str:
    """AGREE when every teacher made the same call, UNKNOWN when a call is missing."""
    if not calls or any(c is None for c in calls):
        return UNKNOWN
    return AGREE if all(c == calls[0] for c in calls) else DISAGREE


def _call(record: dict[str, Any], q: Question, who: str, conv: Any) -> Any:
    return conv(get_path(record, q.calls[who])) if who in q.calls else None


def _label_set(value: Any) -> set[str] | None:
    return {str(v) for v in value} if isinstance(value, list) else None


def _fmt_set(labels: set[str] | None, order: Sequence[str]) -> str:
    if labels is None:
        return "—"
    chosen = [lab for lab in order if lab in labels] + sorted(labels - set(order))
    return ", ".join(chosen) if chosen else "none"


def _scores(
    q: Question,
    teachers: Sequence[str],
    rows: list[ScoreRow],
    calls: Sequence[str],
    cand: str,
    cons: str,
    agreement: str,
    notes: Sequence[str] = (),
) -> QuestionScores:
    return QuestionScores(
        q.name,
        q.kind,
        q.prompt,
        q.threshold,
        tuple(teacher_name(t) for t in teachers),
        tuple(rows),
        tuple(calls),
        cand,
        cons,
        agreement,
        tuple(notes),
    )


def _multi(q: Question, record: dict[str, Any], teachers: Sequence[str]) -> QuestionScores:
    vectors = [_vector(record, q.scores.get(t), len(q.labels)) for t in teachers]
    sets: list[set[str] | None] = []
    for t, vec in zip(teachers, vectors, strict=True):
        given = _call(record, q, t, _label_set)
        known = [v for v in vec if v is not None]
        if given is None and len(known) == len(vec):
            given = {lab for lab, v in zip(q.labels, known, strict=True) if v >= q.threshold}
        sets.append(given)
    cand, cons = (_call(record, q, w, _label_set) for w in ("candidate", "consensus"))
    rows = []
    for i, lab in enumerate(q.labels):
        scores = tuple(vec[i] for vec in vectors)
        called = tuple(bool(s is not None and lab in s) for s in sets)
        rows.append(
            ScoreRow(
                lab,
                scores,
                called,
                (False,) * len(teachers),
                lab in (cand or ()),
                lab in (cons or ()),
                _row_agreement(called, scores),
                q.definition_of(lab),
            )
        )
    return _scores(
        q,
        teachers,
        rows,
        [_fmt_set(s, q.labels) for s in sets],
        _fmt_set(cand, q.labels),
        _fmt_set(cons, q.labels),
        _agreement(sets),
    )


def _binary(q: Question, record: dict[str, Any], teachers: Sequence[str]) -> QuestionScores:
    scores = tuple(
        _number(get_path(record, q.scores[t])) if t in q.scores else None for t in teachers
    )
    calls: list[bool | None] = []
    for t, v in zip(teachers, scores, strict=True):
        given = _call(record, q, t, _yes_no)
        calls.append(given if given is not None else (None if v is None else v >= q.threshold))
    cand, cons = (_call(record, q, w, _yes_no) for w in ("candidate", "consensus"))
    called = tuple(bool(c) for c in calls)
    row = ScoreRow(
        "yes",
        scores,
        called,
        (False,) * len(teachers),
        bool(cand),
        bool(cons),
        _row_agreement(called, scores),
        q.definition_of("yes"),
    )

    def word(v: bool | None) -> str:
        return "—" if v is None else ("yes" if v else "no")

    return _scores(
        q, teachers, [row], [word(c) for c in calls], word(cand), word(cons), _agreement(calls)
    )


def _argmax(vec: Sequence[float | None]) -> int | None:
    if not vec or any(v is None for v in vec):
        return None
    return max(range(len(vec)), key=lambda i: (vec[i], -i))


def _single(q: Question, record: dict[str, Any], teachers: Sequence[str]) -> QuestionScores:
    vectors = [_vector(record, q.scores.get(t), len(q.labels)) for t in teachers]
    tops = [_argmax(vec) for vec in vectors]
    calls: list[str | None] = []
    notes: list[str] = []
    for t, vec, top in zip(teachers, vectors, tops, strict=True):
        if t not in q.calls:  # no call in the record: the teacher's highest score
            calls.append(q.labels[top] if top is not None else None)
            continue
        call = _call(record, q, t, _text)
        if call is not None and top is not None and call != q.labels[top]:
            notes.append(
                f"{teacher_name(t)}'s call ({call}) is not its highest score "
                f"({q.labels[top]} {fmt_score(vec[top])})"
            )
        calls.append(call)
    cand, cons = (_call(record, q, w, _text) for w in ("candidate", "consensus"))
    rows = []
    for i, lab in enumerate(q.labels):
        called = tuple(c == lab for c in calls)
        rows.append(
            ScoreRow(
                lab,
                tuple(vec[i] for vec in vectors),
                called,
                tuple(top == i for top in tops),
                cand == lab,
                cons == lab,
                "both" if all(called) else ("split" if any(called) else ""),
                q.definition_of(lab),
            )
        )
    return _scores(
        q,
        teachers,
        rows,
        [c or "no call" for c in calls],
        cand or "—",
        cons or "—",
        _agreement(calls),
        notes,
    )


def question_scores(q: Question, record: dict[str, Any], teachers: Sequence[str]) -> QuestionScores:
    """The machine view of one question for a record (missing scores show as dashes)."""
    if q.kind == "multi":
        return _multi(q, record, teachers)
    if q.kind == "binary":
        return _binary(q, record, teachers)
    return _single(q, record, teachers)


def _machine(record: dict[str, Any]) -> MachineScores | None:
    ms = record.get("machine_scores")
    if not isinstance(ms, dict):
        return None

    def flag(key: str) -> bool | None:
        v = ms.get(key)
        return v if isinstance(v, bool) else None

    vs, note = ms.get("validation_status"), ms.get("note")
    return MachineScores(
        _number(ms.get("score_opus")),
        _number(ms.get("score_gpt")),
        _number(ms.get("score_spread")),
        flag("provisional"),
        flag("baseline"),
        flag("maturity_gate_passed"),
        None if vs is None else str(vs),
        None if note is None else str(note),
    )


def build_card(
    record: dict[str, Any], schema: Schema, questions: Sequence[Question] | None = None
) -> WorkCard:
    """The card of one work from its original record, for the questions asked (default: all).

    Args:
        record: the frame record exactly as stored (works.record).
        schema: the label schema (score paths, labels, teachers, thresholds).
        questions: the campaign's questions; None for every question of the schema.
    """
    raw_pred, raw_routes = record.get("prediction"), record.get("routes")
    pred: dict[str, Any] = raw_pred if isinstance(raw_pred, dict) else {}
    doi, doi_url = doi_link(record.get("doi"))
    routes: dict[str, Any] = raw_routes if isinstance(raw_routes, dict) else {}
    wanted = list(schema.questions) if questions is None else list(questions)

    def typed(key: str, kind: type) -> Any:
        value = record.get(key)
        return value if type(value) is kind else None  # bool is not an int here

    return WorkCard(
        work_id=str(record.get("id") or ""),
        title=_text(record.get("title")) or "(no title)",
        year=typed("year", int),
        **{k: _text(record.get(k)) for k in ("type", "venue", "lang", "topic", "field")},
        cited_by=typed("cited_by", int),
        doi=doi,
        doi_url=doi_url,
        openalex_url=openalex_link(record.get("id")),
        keywords=_split(record.get("keywords")),
        institutions=_split(record.get("ca_institutions")),
        funders=_split(record.get("funders")),
        routes=tuple((str(k), bool(v)) for k, v in routes.items()),
        is_retracted=typed("is_retracted", bool),
        retraction=_retraction(record.get("retraction")),
        has_abstract=typed("has_abstract", bool),
        model_version=_text(pred.get("model_version")),
        prediction_status=_text(pred.get("prediction_status")),
        teacher_disagreement=_number(pred.get("teacher_disagreement_score")),
        threshold_uncertainty=_number(pred.get("threshold_uncertainty_score")),
        questions=tuple(question_scores(q, record, schema.teachers) for q in wanted),
        machine=_machine(record),
    )
