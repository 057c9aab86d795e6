"""What every gold-set column means, in plain words: for the manifest, README and the preview.

A column is described by its exact name, or by its shape: `human_<question>`,
`machine_<question>_<teacher|candidate|consensus>` and `<machine column>_current`. A column
that none of these describes gets None, which tests/export/test_column_docs.py refuses, so a
new column cannot ship undescribed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from labeling.schema import Question, Schema

CURRENT = "_current"  # as definitions.CURRENT (not imported: definitions imports this module)

# Exact names: the wide file's fixed columns.
WIDE = {
    "work_id": "the OpenAlex work id (e.g. W4413411773); one row per work, in id order",
    "human_status": "the human outcome: human_validated (ground truth), human_disputed "
    "(annotators disagree, awaiting a lead), human_in_review (fewer labels than the campaign "
    "needs) or machine_predicted_unvalidated (no human label yet); filter on this one to train",
    "doi": "the work's DOI, from the frame",
    "title": "the work's title, from the frame",
    "year": "the publication year, from the frame",
    "validation_method": "how the work was validated: rule (a campaign's agreement rule), "
    "adjudicated (by a lead) or model (labeling aggregate --validate); empty unless "
    "human_validated",
    "validation_rule": "the campaign rule that validated the work, e.g. unanimous:k=2 "
    "(validation_method rule only)",
    "validation_campaign": "the campaign whose rule validated the work (validation_method rule "
    "only)",
    "validated_by": "the lead who adjudicated the work (a pseudonym with --pseudonymize; "
    "validation_method adjudicated only)",
    "validated_via": "how the work was validated, as stored: rule:RULE:cID (the campaign id), "
    "adjudicated:LEAD or model:dawid-skene; empty unless human_validated",
    "dispute_open": "human_validated works: true while another campaign's differing verdict "
    "awaits a lead (the human answers exported are still the validated ones); empty otherwise",
    "corroborated_by": "human_validated works: the other campaigns whose verdicts agree with the "
    "validated answers; empty otherwise",
    "n_labels": "how many current labels the work has (each annotator's latest, skips left "
    "out; with --campaign, that campaign's only)",
    "annotators": "who gave those labels, sorted (pseudonyms with --pseudonymize)",
    "flags": "how many of the work's current labels an annotator flagged for the lead (skips "
    "included; with --campaign, that campaign's only)",
    "flag_notes": "each of those flags as 'annotator: note' ('(no note)' when none was "
    "written), by campaign and annotator",
    "agreement": "the share of agreeing pairs of answers among those labels, averaged over the "
    "exported questions answered at least twice; empty when none was",
    "first_labelled_at": "when the first of those labels was made (UTC, ISO 8601)",
    "last_labelled_at": "when the last of those labels was made (UTC, ISO 8601)",
    "model_version": "the frame's model_version the labels were made on (the newest label's), "
    "else the stored record's; the machine columns without _current are this revision's",
    "model_version_current": "the model_version of the work's stored (latest imported) frame "
    "record",
    "score_opus": "verbatim from the frame (machine_scores.score_opus): one of the student "
    "model's two teacher heads, read on this work; ranks works, never asserts a category",
    "score_gpt": "verbatim from the frame (machine_scores.score_gpt): the other teacher head; "
    "ranks works, never asserts a category",
    "score_spread": "verbatim from the frame (machine_scores.score_spread): how far the two "
    "heads' scores lie apart",
    "scores_provisional": "verbatim from the frame (machine_scores.provisional): the machine "
    "scores are provisional",
    "scores_baseline": "verbatim from the frame (machine_scores.baseline): the machine scores "
    "come from a baseline model",
    "scores_maturity_gate_passed": "verbatim from the frame (machine_scores."
    "maturity_gate_passed): whether the scoring model passed its maturity gate",
    "validation_status": "verbatim from the frame (machine_scores.validation_status): the "
    "machine scores' validation status, e.g. score_only:v0-immature-baseline; ships with "
    "every row and says nothing about the human outcome (human_status)",
    "scores_note": "verbatim from the frame (machine_scores.note): the scoring model's note",
    "prediction_status": "verbatim from the frame (prediction.prediction_status): the machine "
    "prediction's own status, machine_predicted_unvalidated in every frame row; never a human "
    "outcome (human_status is)",
    "teacher_disagreement_score": "verbatim from the frame (prediction."
    "teacher_disagreement_score): how much the teachers disagree on the work",
    "threshold_uncertainty_score": "verbatim from the frame (prediction."
    "threshold_uncertainty_score): how close the scores lie to the call thresholds",
    "sample_campaign": "the probability-sample campaign the design columns belong to (only "
    "when --campaign names one)",
    "stratum": "the work's stratum in that sample",
    "inclusion_prob": "the work's probability of being drawn into that sample",
    "weight": "the design weight, 1 / inclusion_prob",
}
# The --long labels file: one row per question of each current label.
LONG = {
    "work_id": "the OpenAlex work id",
    "annotator": "who labelled (a pseudonym with --pseudonymize)",
    "question": "the schema question answered",
    "value": "the answer (multi-label: a list in JSON Lines, ';'-joined in CSV and Parquet)",
    "created_at": "when the label was made (UTC, ISO 8601)",
    "confidence": "the annotator's confidence: 1 low, 2 medium, 3 high; empty if not given",
    "note": "the annotator's note",
    "campaign": "the campaign the label belongs to",
    "version": "the label's version (an edit with B makes a new one; this is the latest)",
    "time_on_item_ms": "time spent on the work before submitting, in milliseconds",
    "model_version": "the frame's model_version the label was made on",
    "scores_visible": "whether the teachers' scores were shown before the label was submitted",
    "schema_hash": "the hash of the label schema the label was made under",
    "flagged": "whether the annotator flagged the label for the lead (the note says why)",
}
# Per-question columns and the stored record's: {q} is the question, {who} the teacher (README:
# "the question", "the teacher"), {base} the column without _current.
HUMAN = ("the validated human answer to {q}{many}; empty unless human_status is "
         "human_validated")  # fmt: skip
MACHINE = ("machine, from the frame: {call} on {q}, of the record revision the labels were "
           "made on; never a human answer")  # fmt: skip
CALLS = {"teacher": "{who}'s call (its call field, else its scores at the question's threshold)",
         "candidate": "the candidate call (the union of the teachers' thresholded calls)",
         "consensus": "the consensus call (their intersection)"}  # fmt: skip
STORED = "as {base}, from the work's stored (latest imported) frame record"


def _pattern(name: str, schema: Schema, questions: Sequence[Question]) -> str | None:
    """The description of a per-question column (human_*, machine_*), else None."""
    for q in questions:
        if name == f"human_{q.name}":
            many = " (a list: several labels may apply)" if q.kind == "multi" else ""
            return HUMAN.format(q=q.name, many=many)
        for who in (*schema.teachers, "candidate", "consensus"):
            if name == f"machine_{q.name}_{who}":
                call = CALLS.get(who, CALLS["teacher"]).format(who=who)
                return MACHINE.format(call=call, q=q.name)
    return None


def describe(name: str, schema: Schema, questions: Sequence[Question]) -> str | None:
    """What the gold-set column `name` holds, or None if nothing describes it."""
    if name in WIDE:
        return WIDE[name]
    if found := _pattern(name, schema, questions):
        return found
    base = name.removesuffix(CURRENT)
    if base != name and (found := WIDE.get(base) or _pattern(base, schema, questions)):
        return f"{STORED.format(base=base)}: {found}"
    return None


def markdown() -> str:
    """README's tables of the columns (the gold set's, then the labels file's), in file order."""
    q, who = "the question", "the teacher"
    generic = {
        "human_<question>": HUMAN.format(q=q, many=" (a list for multi-label questions)"),
        "machine_<question>_<teacher>": MACHINE.format(call=CALLS["teacher"].format(who=who), q=q),
        "machine_<question>_candidate": MACHINE.format(call=CALLS["candidate"], q=q),
        "machine_<question>_consensus": MACHINE.format(call=CALLS["consensus"], q=q),
        "<column>_current": STORED.format(base="the column without _current") + " (the calls, "
        "and the scores kept as works columns); the same values unless the record changed "
        "since the labels",
    }  # fmt: skip
    wide = list(WIDE.items())
    at = {name: i for i, (name, _) in enumerate(wide)}
    wide.insert(at["validation_method"], ("human_<question>", generic["human_<question>"]))
    at = {name: i for i, (name, _) in enumerate(wide)}
    machine = [(n, generic[n]) for n in list(generic)[1:4]]
    wide[at["score_opus"] : at["score_opus"]] = machine
    at = {name: i for i, (name, _) in enumerate(wide)}
    wide.insert(at["sample_campaign"], ("<column>_current", generic["<column>_current"]))
    lines = ["| column | what it holds |", "|---|---|"]
    lines += [f"| `{n}` | {d} |" for n, d in wide]
    lines += ["", "| labels file column | what it holds |", "|---|---|"]
    lines += [f"| `{n}` | {d} |" for n, d in LONG.items()]
    return "\n".join(lines) + "\n"


def described(
    columns: Sequence[tuple[str, str]], schema: Schema, questions: Sequence[Question]
) -> list[dict[str, Any]]:
    """The manifest's `columns`: name, type and description of each column, in file order."""
    return [{"name": c, "type": k, "description": describe(c, schema, questions)}
            for c, k in columns]  # fmt: skip


def described_long(columns: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """The manifest's labels_file `columns`, in file order."""
    return [{"name": c, "type": k, "description": LONG.get(c)} for c, k in columns]


def preview_order(columns: Sequence[tuple[str, str]], questions: Sequence[Question]) -> list[str]:
    """The columns as a preview shows them: the work id, title and human answers first (what
    a reader checks), then the rest in file order."""
    first = ["work_id", "title", *(f"human_{q.name}" for q in questions)]
    names = [c for c, _ in columns]
    return [c for c in first if c in names] + [c for c in names if c not in first]


if __name__ == "__main__":  # python -m labeling.export.column_docs: README's tables
    print(markdown(), end="")
