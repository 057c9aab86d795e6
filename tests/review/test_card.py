"""The work card view model: built from the seed record, degraded records, and escaping."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from labeling.review.card import (
    AGREE,
    DISAGREE,
    SCORES_RANK,
    UNKNOWN,
    build_card,
    doi_link,
    fmt_score,
    openalex_link,
)
from labeling.review.flow import Draft, option_key, question_keys
from labeling.schema import Schema
from pages._ui import escape_markdown
from ui.components.card_data import score_table


def _q(card: Any, name: str) -> Any:
    return next(q for q in card.questions if q.name == name)


def test_bibliographic_fields_of_the_seed_record(seed_record: dict, schema: Schema) -> None:
    card = build_card(seed_record, schema)
    assert card.work_id == "W4413411773"
    assert card.title.startswith("Cephalo: Harnessing Heterogeneous GPU Clusters")
    assert (card.year, card.type, card.lang, card.field) == (
        2025,
        "article",
        "en",
        "Computer Science",
    )
    assert card.venue is None  # "" in the record
    assert card.doi == "10.1145/3721145.3730418"
    assert card.doi_url == "https://doi.org/10.1145/3721145.3730418"
    assert card.openalex_url == "https://openalex.org/W4413411773"
    assert card.keywords[:3] == ("Computer science", "Transformer", "Training (meteorology)")
    assert len(card.keywords) == 9
    assert card.institutions == ("University of Waterloo",)
    assert card.funders == ("Natural Sciences and Engineering Research Council of Canada",)
    assert dict(card.routes) == {
        "ca_aff": True,
        "ca_fund": True,
        "ca_venue": False,
        "about_ca": False,
        "invisible_to_affiliation_only": False,
    }
    assert card.retraction_state == "Not retracted"
    assert card.has_abstract is False
    assert card.model_version == "metacan-v3-hybrid-931329e0061c"
    assert card.prediction_status == "machine_predicted_unvalidated"


def test_machine_scores_block_is_kept_verbatim(seed_record: dict, schema: Schema) -> None:
    ms = build_card(seed_record, schema).machine
    assert ms.validation_status == "score_only:v0-immature-baseline"
    assert ms.note == seed_record["machine_scores"]["note"]
    assert (ms.score_opus, ms.score_gpt) == (0.05453842143186296, 0.2824619046238849)
    assert ms.score_spread == 0.2279234831920219
    assert ms.flags == ("provisional", "baseline", "maturity gate not passed")
    assert "never asserts a category" in SCORES_RANK


def test_multi_label_table_compares_both_teachers(seed_record: dict, schema: Schema) -> None:
    card = build_card(seed_record, schema)
    cats = _q(card, "categories")
    assert cats.teachers == ("Codex", "Gemma")
    assert [r.label for r in cats.rows] == list(schema.question("categories").labels)
    open_science = cats.rows[6]
    assert open_science.scores == (0.002039854, 0.001343152)
    assert open_science.called == (False, False) and open_science.agreement == "neither"
    assert cats.calls == ("none", "none") and cats.candidate == "none"
    assert cats.agreement == AGREE


def test_multi_label_disagreement_is_marked(seed_record: dict, schema: Schema) -> None:
    rec = copy.deepcopy(seed_record)
    rec["prediction"]["category_scores_codex"][3] = 0.91
    rec["prediction"]["candidate_categories"] = ["Bibliometrics"]
    cats = _q(build_card(rec, schema), "categories")
    row = cats.rows[3]
    assert row.called == (True, False) and row.agreement == "split" and row.candidate
    assert not row.consensus
    assert cats.agreement == DISAGREE
    assert cats.calls == ("Bibliometrics", "none")
    assert ["Bibliometrics", "0.910 ✔", "0.001", "✔", "", "⚠ split"] in score_table(cats)["rows"]


def test_binary_questions(seed_record: dict, schema: Schema) -> None:
    topic = _q(build_card(seed_record, schema), "about_ca_topic")
    (row,) = topic.rows
    assert row.label == "yes" and row.scores == (0.01479584, 0.03790859)
    assert topic.calls == ("no", "no") and topic.candidate == "no" and topic.consensus == "no"
    assert topic.agreement == AGREE


def test_single_choice_calls_and_the_seed_inconsistency(seed_record: dict, schema: Schema) -> None:
    card = build_card(seed_record, schema)
    design = _q(card, "study_design")
    assert design.calls == ("design_other", "simulation_or_modeling")
    assert design.candidate == "simulation_or_modeling" and design.consensus == "—"
    assert design.agreement == DISAGREE
    by_label = {r.label: r for r in design.rows}
    assert by_label["design_other"].called == (True, False)
    assert by_label["simulation_or_modeling"].called == (False, True)
    assert by_label["simulation_or_modeling"].candidate
    genre = _q(card, "genre")
    # genre_gemma is "empirical" but Gemma's highest genre score is "methods": reported.
    assert genre.notes == ("Gemma's call (empirical) is not its highest score (methods 0.531)",)
    assert {r.label: r.top for r in genre.rows}["methods"] == (True, True)
    assert any("0.531 ▲" in row for row in score_table(genre)["rows"])
    domain = _q(card, "domain")
    assert domain.calls == ("no call", "no call") and domain.agreement == UNKNOWN
    assert card.disagreements == ("study_design", "genre")


def test_question_subset_follows_the_campaign(seed_record: dict, schema: Schema) -> None:
    wanted = [schema.question("genre"), schema.question("categories")]
    card = build_card(seed_record, schema, wanted)
    assert [q.name for q in card.questions] == ["genre", "categories"]


def test_a_bare_record_gives_a_card_with_dashes(schema: Schema) -> None:
    card = build_card({"id": "W1"}, schema)
    assert card.title == "(no title)" and card.doi_url is None and card.machine is None
    assert card.keywords == () and card.routes == ()
    assert card.retraction_state == "Retraction state unknown"
    for qs in card.questions:
        assert qs.agreement == UNKNOWN
        assert all(s is None for row in qs.rows for s in row.scores)
    assert all(row[1:3] == ["—", "—"] for row in score_table(card.questions[0])["rows"])


def test_wrong_types_never_crash(seed_record: dict, schema: Schema) -> None:
    rec = copy.deepcopy(seed_record)
    rec.update(
        year="2025",
        cited_by=True,
        routes=["x"],
        keywords=None,
        is_retracted="no",
        machine_scores={"score_opus": "high", "provisional": "yes"},
    )
    rec["prediction"]["category_scores_codex"] = [0.1, 0.2]  # wrong length
    rec["prediction"]["genre_scores_gemma"] = "not a list"
    card = build_card(rec, schema)
    assert card.year is None and card.cited_by is None and card.routes == ()
    assert card.machine.score_opus is None and card.machine.provisional is None
    assert _q(card, "categories").rows[0].scores[0] is None
    assert _q(card, "genre").rows[0].scores == (0.06511579, None)


def test_retracted_work(seed_record: dict, schema: Schema) -> None:
    rec = dict(
        seed_record, is_retracted=True, retraction={"date": "2024-01-02", "reason": "paper mill"}
    )
    card = build_card(rec, schema)
    assert card.retraction_state == "Retracted: date: 2024-01-02; reason: paper mill"


@pytest.mark.parametrize(
    ("raw", "bare", "url"),
    [
        (
            "10.1145/3721145.3730418",
            "10.1145/3721145.3730418",
            "https://doi.org/10.1145/3721145.3730418",
        ),
        ("https://doi.org/10.1000/ABC", "10.1000/ABC", "https://doi.org/10.1000/ABC"),
        (
            "doi:10.1002/(SICI)1097-4571",
            "10.1002/(SICI)1097-4571",
            "https://doi.org/10.1002/%28SICI%291097-4571",
        ),
        ("10.1/a b<c>", "10.1/a b<c>", "https://doi.org/10.1/a%20b%3Cc%3E"),
        ("", None, None),
        (None, None, None),
    ],
)
def test_doi_links_are_encoded(raw: Any, bare: str | None, url: str | None) -> None:
    assert doi_link(raw) == (bare, url)


def test_openalex_link() -> None:
    assert openalex_link("https://openalex.org/w123") == "https://openalex.org/W123"
    assert openalex_link("javascript:alert(1)") is None


@pytest.mark.parametrize(
    "hostile",
    [
        "<script>alert(1)</script>",
        "[click](javascript:alert(1))",
        "**bold** _it_ `code` # head",
        ":red[red] :material/home: $x^2$",
        "a | b\nc",
        "&lt;b&gt; <img src=x onerror=alert(1)>",
    ],
)
def test_escape_markdown_leaves_no_active_syntax(hostile: str) -> None:
    out = escape_markdown(hostile)
    assert "\n" not in out
    # Every Markdown/HTML-significant ASCII character is backslash-escaped.
    unescaped = re.findall(r"(?<!\\)[<>\[\]()*_`#|:$&]", out)
    assert unescaped == []
    assert re.sub(r"\\(.)", r"\1", out) == hostile.replace("\n", " ")


def test_fmt_score() -> None:
    assert fmt_score(None) == "—" and fmt_score(0.0006) == "0.001" and fmt_score(1) == "1.000"


# ------------------------------------------------------------------ keyboard scheme and drafts


def test_keyboard_scheme(schema: Schema) -> None:
    assert question_keys(schema.questions) == ["Q", "W", "E", "T", "Y", "U"]
    assert [option_key(i) for i in (0, 8, 9, 10, 11, 19, 20)] == [
        "1",
        "9",
        "0",
        "Shift+1",
        "Shift+2",
        "Shift+0",
        None,
    ]


def test_question_keys_never_take_action_or_reserved_keys(schema: Schema) -> None:
    from dataclasses import replace

    qs = [
        replace(q, key=k)
        for q, k in zip(schema.questions, ["F", "r", "q", "Q", "É", None], strict=True)
    ]
    assert question_keys(qs) == [None, None, "Q", None, None, None]


def test_draft_choose_toggle_and_move(schema: Schema) -> None:
    questions = list(schema.questions)
    draft = Draft.fresh(questions)
    assert draft.missing(questions) == [q.name for q in questions if q.kind != "multi"]
    draft.choose(questions, 0, "Open science")
    draft.choose(questions, 0, "Bibliometrics")
    draft.choose(questions, 0, "Open science")
    assert draft.answers["categories"] == ["Bibliometrics"] and draft.active == 0
    draft.choose(questions, 1, "no")
    assert draft.answers["about_ca_system"] == "no" and draft.active == 2  # moved on
    draft.move(questions, -5)
    assert draft.active == 0
    draft.choose(questions, len(questions) - 1, "methods")
    assert draft.active == len(questions) - 1  # stays on the last question
