"""The Monitor page in AppTest with 0, 2 and 20 annotators: sentences, charts, CLI's numbers."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import streamlit as st
from click.testing import CliRunner
from streamlit.testing.v1 import AppTest

from labeling.cli.main import main
from labeling.database import dispose_all
from labeling.reports.tables import fmt_ci
from labeling.review.campaigns import campaign_progress, create_campaign, get_campaign
from labeling.review.labels import LabelSubmission, submit_label
from labeling.review.queue import claim_next
from labeling.schema import load_schema
from labeling.settings import DEFAULT_SCHEMA, get_settings
from tests.factories import add_user, answers_for
from tests.pages.test_label_page import build_label_db
from tests.pages.test_lead_pages import login, page_text, plain

WORKS = 30
NUMBER = r"(-?\d+(?:\.\d+)?)(?: s)?"  # a shown number, seconds' unit aside
INTERVAL = re.compile(rf"^{NUMBER}(?: per work)? \[{NUMBER}, {NUMBER}\]")  # "est [lo, hi]"


def label_round(engine: Any, campaign: str, names: list[str], per_name: int, odd: set[str]) -> None:
    """Each annotator labels per_name works; a work's answer is its index mod 3, `odd` ones
    answer otherwise every other work (so agreement varies and some works are disputed) and
    take half a second per work (unusually fast)."""
    schema = load_schema(DEFAULT_SCHEMA)
    from labeling.auth.users import get_user

    cid = get_campaign(engine, campaign).id
    for round_ in range(per_name):
        for name in names:
            uid = get_user(engine, name).id
            claim = claim_next(engine, cid, uid)
            if claim is None:
                continue
            truth = int(claim.work_id[-2:]) % 3
            variant = truth + 1 if name in odd and round_ % 2 == 0 else truth
            submit_label(
                engine,
                LabelSubmission(
                    campaign_id=cid,
                    work_id=claim.work_id,
                    user_id=uid,
                    answers=answers_for(schema, variant),
                    schema_hash=schema.hash,
                    scores_visible=True,
                    model_version="m",
                    time_on_item_ms=500 if name in odd else 4000 + 700 * round_,
                    submission_id=f"{name}-{cid}-{claim.work_id}",
                ),
                schema=schema,
            )


def make_crowd(n: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The app on a database whose campaign "crowd" has labels from n annotators."""
    url = f"sqlite:///{tmp_path / 'crowd.db'}"
    monkeypatch.setenv("LABELING_DB_URL", url)
    monkeypatch.setenv("LABELING_OPENALEX_OFFLINE", "true")
    get_settings.cache_clear()
    st.cache_resource.clear()
    st.cache_data.clear()
    engine = build_label_db(url, tmp_path, n=WORKS)
    overlap = 2 if n <= 2 else 4
    create_campaign(engine, name="crowd", strategy="score_opus", overlap=overlap)
    names = ["annotator", "annotator2"][:n]
    for i in range(max(0, n - 2)):
        names.append(f"extra{i + 1:02d}")
        add_user(engine, names[-1])
    if n:
        label_round(engine, "crowd", names, 12 if n == 2 else 6, odd={names[-1]})
    yield {"url": url, "engine": engine, "n": n, "names": names}
    st.cache_resource.clear()
    st.cache_data.clear()
    get_settings.cache_clear()
    dispose_all()


@pytest.fixture(params=[0, 2, 20], ids=["0-annotators", "2-annotators", "20-annotators"])
def crowd(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    """The crowd database with 0, 2 or 20 annotators."""
    yield from make_crowd(request.param, tmp_path, monkeypatch)


@pytest.fixture
def pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The crowd database with 2 annotators."""
    yield from make_crowd(2, tmp_path, monkeypatch)


def cli_json(url: str, *args: str) -> dict[str, Any]:
    """A CLI command's JSON output."""
    result = CliRunner().invoke(main, ["--db", url, *args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def frame_with(at: AppTest, column: str, nth: int = 0) -> pd.DataFrame:
    """The nth dataframe on the page that has this column."""
    found = [df.value for df in at.dataframe if column in df.value.columns]
    assert len(found) > nth, [list(df.value.columns) for df in at.dataframe]
    return found[nth]


def open_crowd(crowd: dict[str, Any]) -> AppTest:
    at = login("lead", "pages/monitor.py")
    at.selectbox(key="mon_campaign").set_value(get_campaign(crowd["engine"], "crowd").id).run()
    assert not at.exception, at.exception
    return at


def test_monitor_page(crowd: dict[str, Any]) -> None:
    at = open_crowd(crowd)
    text = plain(page_text(at))
    engine, n = crowd["engine"], crowd["n"]
    camp = get_campaign(engine, "crowd")
    p = campaign_progress(engine, camp.id)
    assert f"{p['done']} of {p['items']} works have all {camp.overlap} label(s)" in text
    assert f"{p['labels']} labels counted, {p['skips']} skips" in text
    for heading in (
        "How far are we?",
        "Who needs attention?",
        "Which questions are unreliable?",
        "How good are the teachers?",
    ):
        assert heading in text
    if n == 0:
        for sentence in (
            "No labels yet: no rate and no ETA.",
            "No labels yet: nobody to look at.",
            "No labels yet: there is no agreement to measure.",
            f"No validated works yet: 0 of {WORKS} works in this campaign.",
            "No labels or status changes yet in this campaign.",
        ):
            assert sentence in text
        # the reliability question says it once (its empty table kept quiet), the Agreement
        # tab once more
        assert text.count("No labels yet: there is no agreement to measure.") == 2
        assert not at.dataframe  # sentences, never a table of zeros
        assert not at.get("vega_lite_chart")
        return
    assert "labels per hour [" in text
    if p["remaining"]:
        assert "ETA for the" in text
    else:
        assert "Every work has its labels." in text
    # Which questions are unreliable: the CLI's alpha and interval, question by question.
    report = cli_json(crowd["url"], "agreement", "--campaign", "crowd")
    shown = frame_with(at, "level").set_index("question")
    for q, entry in report["questions"].items():
        ci = entry["alpha_ci"] or [None, None]
        assert shown.loc[q, "alpha [95% CI]"] == fmt_ci(entry["krippendorff_alpha"], *ci), q
        assert shown.loc[q, "n_works"] == entry["n_works"]
    # How good are the teachers: the CLI's precision and recall per teacher and label.
    machines = cli_json(crowd["url"], "machines", "--campaign", "crowd")
    assert machines["n_works"] > 0
    teachers = frame_with(at, "precision_n")  # the first: the teachers' answer at the top
    assert set(teachers["system"]) == {"codex", "gemma"}
    everything = frame_with(at, "precision_n", 1)  # the full table in its tab
    assert set(everything["system"]) > {"codex", "gemma", "candidate", "consensus"}
    for r in teachers.itertuples(index=False):
        m = machines["questions"][r.question]["systems"][r.system]["labels"][r.label]
        prec, rec = m["precision"], m["recall"]
        assert r[teachers.columns.get_loc("precision [95% CI]")] == fmt_ci(
            prec["estimate"], prec["lo"], prec["hi"]
        )
        assert r[teachers.columns.get_loc("recall [95% CI]")] == fmt_ci(
            rec["estimate"], rec["lo"], rec["hi"]
        )
        assert r.precision_n == prec["n"] and r.recall_n == rec["n"]
    # The pairwise kappa: each pair's n is the CLI's summed over questions.
    pairs = frame_with(at, "kappa")
    cli_n: dict[tuple[str, str], int] = {}
    for pair in report["pairs"]:
        if pair["cohen_kappa"] is not None:
            key = (pair["a"], pair["b"])
            cli_n[key] = cli_n.get(key, 0) + pair["n"]
    got = {(r.a, r.b): r.n for r in pairs.itertuples(index=False) if r.a < r.b}
    assert got == cli_n
    # Annotators: one row each, the charts drawn (progress, throughput, time, kappa, ...).
    annotators = frame_with(at, "per_hour")
    assert sorted(annotators["annotator"]) == sorted(crowd["names"])
    charts = at.get("vega_lite_chart")
    assert len(charts) >= 5
    specs = [json.loads(c.proto.spec) for c in charts]
    assert any("kappa" in json.dumps(s) for s in specs)
    attention = frame_with(at, "reason")
    flagged = set(zip(attention["annotator"], attention["reason"], strict=True))
    assert (crowd["names"][-1], "unusually fast") in flagged
    if n > 2:
        # The careless annotator stands out against the others' answers, although under the
        # unanimous rule everyone agrees with the validated answers by construction.
        assert camp.rule == "unanimous"
        assert (crowd["names"][-1], "far from the others' answers") in flagged
        others = annotators.set_index("annotator")["agreement with the others [95% CI]"]
        assert others[crowd["names"][-1]] < others[crowd["names"][0]]
    # Every interval on the page, in every table and tab, contains its estimate (rounding is
    # monotone: a shown "est [lo, hi]" out of order means the real one was).
    shown_intervals = 0
    for frame in at.dataframe:
        for cell in frame.value.to_numpy().ravel():
            m = INTERVAL.search(str(cell))
            if m:
                est, lo, hi = (float(x) for x in m.groups())
                assert lo <= est <= hi, cell
                shown_intervals += 1
    assert shown_intervals > 10
    # Every table has its CSV and every chart its PNG and SVG, nothing else and none missing.
    downloads = at.get("download_button")
    names = [d.proto.label for d in downloads]
    assert len(downloads) == len(at.dataframe) + 2 * len(charts), names
    assert names.count("CSV") == len(at.dataframe), names
    assert names.count("PNG") == names.count("SVG") == len(charts), names


def test_small_campaign_shows_no_interval_and_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """8 works labelled twice: each alpha shows alone, with the reason, as in the CLI's JSON."""
    made = make_crowd(0, tmp_path, monkeypatch)
    crowd = next(made)
    label_round(crowd["engine"], "crowd", ["annotator", "annotator2"], 8, odd={"annotator2"})
    at = open_crowd(crowd)
    report = cli_json(crowd["url"], "agreement", "--campaign", "crowd")
    shown = frame_with(at, "level").set_index("question")
    for q, entry in report["questions"].items():
        assert entry["alpha_ci"] is None and entry["kappa_ci"] is None
        if entry["krippendorff_alpha"] is None:
            continue
        why = "fewer than 10 works with two labels or more (8)"
        assert entry["alpha_ci_reason"] == why
        assert shown.loc[q, "alpha [95% CI]"] == f"{entry['krippendorff_alpha']:.2f}"
        assert shown.loc[q, "no interval because"] == why
    agreement = frame_with(at, "alpha_ci_reason")
    assert set(agreement["kappa_ci_reason"]) <= {"", why}
    next(made, None)


def test_a_new_label_shows_after_refresh(pair: dict[str, Any]) -> None:
    """The statistics are cached on the label count: a new label recomputes them."""
    crowd = pair
    at = open_crowd(crowd)
    before = frame_with(at, "per_hour").set_index("annotator")["submitted"].sum()
    label_round(crowd["engine"], "crowd", ["annotator"], 1, odd=set())
    at.run()
    assert not at.exception, at.exception
    after = frame_with(at, "per_hour").set_index("annotator")["submitted"].sum()
    assert after == before + 1
    p = campaign_progress(crowd["engine"], get_campaign(crowd["engine"], "crowd").id)
    assert f"{p['labels']} labels counted" in plain(page_text(at))


def test_campaigns_page_counts_equal_the_database(pair: dict[str, Any]) -> None:
    """Campaign progress is read from the database on every run: new labels show at once."""
    engine = pair["engine"]
    camp = get_campaign(engine, "crowd")
    at = login("lead", "pages/campaigns.py")
    at.selectbox(key="camp_pick").set_value(camp.id).run()
    assert not at.exception, at.exception

    def shown() -> dict[str, str]:
        return {m.label: m.value for m in at.metric}

    assert shown()["Labels counted"] == str(campaign_progress(engine, camp.id)["labels"])
    label_round(engine, "crowd", ["annotator", "annotator2"], 2, odd=set())
    at.run()
    p = campaign_progress(engine, camp.id)
    assert shown()["Labels counted"] == str(p["labels"])
    assert (
        f"{p['done']} of {p['items']} works have all their labels"
        in at.get("progress")[0].proto.text
    )
