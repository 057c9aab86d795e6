"""The label page's test helpers: a seed-like database, sign-in, and the label component's
browser side faked for AppTest (read what the page mounted, send actions as the component's
JS would: one trigger per action, the whole label on submit)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select
from streamlit.testing.v1 import AppTest

from db.engine import read_session
from db.models import Label
from labeling.database import get_engine, init_db
from labeling.settings import DEFAULT_SCHEMA

_ids = itertools.count(1)

APP = Path(__file__).resolve().parents[1] / "app.py"
SEED = Path(__file__).resolve().parent / "fixtures" / "seed_record.json"
PASSWORD = "pw-label-test"
HOSTILE = "<script>alert(1)</script> [x](javascript:alert(2)) **bold** :red[red] $x$"


def seed_records(n: int, *, hostile_first: bool = False) -> list[dict[str, Any]]:
    """N copies of the seed record with distinct ids, titles and decreasing machine scores."""
    seed = json.loads(SEED.read_text(encoding="utf-8"))
    out = []
    for i in range(n):
        rec = json.loads(json.dumps(seed))
        rec["id"] = f"W{9000001 + i}"
        title = f"Test work {i + 1}: {seed['title']}"
        rec["title"] = HOSTILE if hostile_first and i == 0 else title
        rec["has_abstract"] = i % 4 != 3
        opus = round(0.9 - i * 0.8 / max(n, 1), 6)
        rec["machine_scores"].update(
            score_opus=opus, score_gpt=opus / 2, score_spread=round(opus / 2, 6)
        )
        out.append(rec)
    return out


def build_label_db(
    url: str, tmp: Path, *, n: int = 12, hostile_first: bool = False, cache_all: bool = False
) -> Engine:
    """N seed-like works, cached abstracts, one user per role and four campaigns.

    Abstracts: 3 works in 4 have one; the last work is not cached (offline state) unless
    cache_all, which gives every work an abstract. Campaigns: "top" (overlap 2), "blind",
    "tail" (only the lowest-scored work) and "sample" (stratified).
    """
    from labeling.auth.users import add_user
    from labeling.frames.demo import seed_abstract_cache
    from labeling.frames.importer import import_frame
    from labeling.review.campaigns import create_campaign
    from labeling.schema import load_schema

    engine = init_db(url)
    schema = load_schema(DEFAULT_SCHEMA)
    records = seed_records(n, hostile_first=hostile_first)
    frame = tmp / "frame.jsonl"
    frame.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    import_frame(engine, frame, schema, progress=False)
    if cache_all:
        for r in records:
            r["has_abstract"] = True
    seed_abstract_cache(
        engine,
        {
            r["id"]: (
                f"Abstract of {r['id']}: <b>not bold</b> [link](javascript:x) the work "
                "studies GPU clusters."
                if r["has_abstract"]
                else None
            )
            for r in (records if cache_all else records[:-1])
        },
    )
    for name, role in (
        ("annotator", "annotator"),
        ("annotator2", "annotator"),
        ("lead", "lead"),
        ("exporter", "exporter"),
        ("admin", "admin"),
    ):
        add_user(engine, name, role, PASSWORD)
    create_campaign(engine, name="top", strategy="score_opus", overlap=2)
    create_campaign(engine, name="blind", strategy="score_opus", overlap=1, blind=True)
    lowest = min(r["machine_scores"]["score_opus"] for r in records)
    create_campaign(
        engine, name="tail", strategy="score_opus", filter={"score_opus": [None, lowest + 1e-9]}
    )
    return engine


def login(name: str, page: str | None = "pages/label.py") -> AppTest:
    """Run the app, sign in, and open a page."""
    at = AppTest.from_file(str(APP), default_timeout=30).run()
    at.text_input(key="login_name").input(name)
    at.text_input(key="login_password").input(PASSWORD)
    at.button[0].click().run()
    assert not at.exception, at.exception
    if page:
        at.switch_page(page).run()
        assert not at.exception, at.exception
    return at


def labels(url: str) -> list[Label]:
    """Every stored label version, oldest first (detached, attributes loaded)."""
    with read_session(get_engine(url)) as session:
        rows = list(session.execute(select(Label).order_by(Label.id)).scalars())
        session.expunge_all()
    return rows


def plain(markdown_text: str) -> str:
    """Escaped Markdown back to the text it shows."""
    return re.sub(r"\\(.)", r"\1", markdown_text)


def texts(at: AppTest) -> list[str]:
    """The bodies of every st.text element."""
    return [t.value for t in at.text]


def form(at: AppTest, name: str = "label_form") -> dict[str, Any]:
    """The data the page gave a component (the label form by default) in its last run."""
    found = [e for e in at.get("bidi_component") if e.proto.component_name.endswith(name)]
    assert found, f"the {name} component is not on the page"
    return json.loads(found[-1].proto.json)


def first_answers(data: dict[str, Any]) -> dict[str, Any]:
    """Every question answered with its first option (a list for multi-label questions)."""
    return {
        q["name"]: [q["labels"][0]] if q["kind"] == "multi" else q["labels"][0]
        for q in data["questions"]
    }


class Browser:
    """Stands in for a component's JS (assets/<name>.js): each `send` is one trigger and one
    rerun."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, name: str = "label_form") -> None:
        import importlib

        module = importlib.import_module(f"ui.components.{name}")
        self.queue: list[Any] = []
        self.sent: list[Any] = []
        monkeypatch.setattr(module, "action", lambda state: self._next())

    def _next(self) -> Any:
        return self.queue.pop(0) if self.queue else None

    def send(self, at: AppTest, kind: str, **fields: Any) -> AppTest:
        """Send one action (a fresh id unless given) and run the page."""
        payload = {"id": f"a{next(_ids)}", "type": kind, **fields}
        return self.resend(at, payload)

    def resend(self, at: AppTest, payload: Any) -> AppTest:
        """Send this exact payload (a repeat, or a malformed one) and run the page."""
        self.queue.append(payload)
        self.sent.append(payload)
        at.run()
        assert not at.exception, at.exception
        return at

    def submit(
        self,
        at: AppTest,
        answers: dict[str, Any] | None = None,
        *,
        skip: str | None = None,
        confidence: int | None = None,
        flagged: bool = False,
        note: str = "",
        ms: int = 1200,
    ) -> AppTest:
        """Submit the shown work with these answers (default: every first option)."""
        data = form(at)
        if answers is None:
            answers = {} if skip else first_answers(data)
        return self.send(
            at,
            "submit",
            submission_id=data["submission_id"],
            work_id=data["work_id"],
            answers=answers,
            confidence=confidence,
            flagged=flagged,
            note=note,
            skip_reason=skip,
            time_on_item_ms=ms,
            scores_visible=data["scores_visible"],
        )
