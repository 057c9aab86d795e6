"""CLI for campaigns, abstracts (against a local HTTP server) and agreement."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from click.testing import CliRunner

from labeling.cli.main import main
from labeling.settings import get_settings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "openalex"


def run(url: str, *args: str):
    """Invoke the CLI against `url`."""
    return CliRunner().invoke(main, ["--db", url, *args], catch_exceptions=False)


@pytest.fixture
def demo_url(tmp_path: Path) -> str:
    """A demo database (real works, cached abstracts, demo users and campaigns)."""
    url = f"sqlite:///{tmp_path}/demo.db"
    assert run(url, "demo").exit_code == 0
    return url


def test_campaigns_create_and_list(demo_url: str) -> None:
    result = run(demo_url, "campaigns", "create", "top-cs", "--strategy", "score_opus", "-k", "2",
                 "--filter", '{"year_min": 2000}', "--questions", "categories,genre")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "score order (not a sample)" in result.output
    sample = run(demo_url, "campaigns", "create", "sample", "--strategy", "stratified", "-n", "30",
                 "--seed", "3")  # fmt: skip
    assert sample.exit_code == 0 and "probability sample" in sample.output
    listed = run(demo_url, "campaigns", "list").output
    assert "top-cs\tscore_opus\tk=2" in listed and "sample\tstratified" in listed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--filter", "{nope"], "--filter is not valid JSON"),
        (["--filter", '{"colour": "red"}'], "colour"),
        (["--strategy", "random"], "sample"),
        (["--questions", "nope"], "nope"),
    ],
)
def test_campaigns_create_rejects_bad_input(demo_url: str, args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["--db", demo_url, "campaigns", "create", "x", *args])
    assert result.exit_code == 2
    assert message in result.output


class _FakeOpenAlex(BaseHTTPRequestHandler):
    """Answers /works?filter=openalex_id:... from the fixture pages, like OpenAlex does."""

    works: dict[str, dict] = {}
    requests: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.requests.append(self.path)
        query = parse_qs(urlparse(self.path).query)
        ids = query.get("filter", [""])[0].removeprefix("openalex_id:").split("|")
        results = [
            {"id": self.works[i]["id"], "abstract_inverted_index":
             self.works[i]["abstract_inverted_index"]}
            for i in ids if i in self.works
        ]  # fmt: skip
        body = json.dumps({"meta": {"count": len(results)}, "results": results}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def openalex(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_FakeOpenAlex]]:
    """A local OpenAlex stand-in; LABELING_OPENALEX_URL points at it."""
    works = {}
    for page in FIXTURES.glob("works_page_*.json"):
        for w in json.loads(page.read_text())["results"]:
            works[w["id"].rsplit("/", 1)[-1]] = w
    _FakeOpenAlex.works = works
    _FakeOpenAlex.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAlex)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("LABELING_OPENALEX_URL", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setenv("LABELING_OPENALEX_API_KEY", "test-key")
    get_settings.cache_clear()
    yield _FakeOpenAlex
    server.shutdown()
    get_settings.cache_clear()


def test_abstracts_prefetch_and_show_over_http(openalex, sqlite_url: str) -> None:
    ids = sorted(openalex.works)[:60]
    result = run(sqlite_url, "abstracts", "prefetch", "--ids", ",".join(ids))
    assert result.exit_code == 0, result.output
    absent = sum(1 for i in ids if not openalex.works[i]["abstract_inverted_index"])
    assert f"{len(ids) - absent} fetched, {absent} absent, 0 failed" in result.output
    assert len(openalex.requests) == 2  # 60 ids: batches of 50 and 10
    assert all("api_key=test-key" in r for r in openalex.requests)
    shown = run(sqlite_url, "abstracts", "show", ids[0])
    assert shown.exit_code == 0 and f"== {ids[0]} [" in shown.output
    assert len(openalex.requests) == 2  # served from the cache
    again = run(sqlite_url, "abstracts", "prefetch", "--ids", ",".join(ids))
    assert f"{len(ids)} already cached" in again.output


def test_abstracts_prefetch_for_a_campaign_when_offline(demo_url, monkeypatch) -> None:
    monkeypatch.setenv("LABELING_OPENALEX_OFFLINE", "true")
    get_settings.cache_clear()
    try:
        result = run(demo_url, "abstracts", "prefetch", "--campaign", "demo-top", "--limit", "20")
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0
    assert "20 requested" in result.output and "20 already cached" in result.output


def test_abstracts_prefetch_needs_one_source(sqlite_url: str) -> None:
    result = CliRunner().invoke(main, ["--db", sqlite_url, "abstracts", "prefetch"])
    assert result.exit_code == 2 and "exactly one of --campaign or --ids" in result.output


def test_agreement_json_is_strict_json_with_the_documented_keys(demo_url, tmp_path) -> None:
    rows = ["work_id,annotator,question,value"]
    works = ["W4413411773", "W2741809807", "W1934649023", "W2755950973"]
    for i, work in enumerate(works):
        for who in ("ann", "bob", "cy"):
            genre = "methods" if (who != "cy" or i % 2) else "empirical"
            rows.append(f"{work},{who},genre,{genre}")
            rows.append(f"{work},{who},categories,Bibliometrics;Open science")
            rows.append(f"{work},{who},about_ca_system,{'yes' if i == 0 else 'no'}")
    path = tmp_path / "labels.csv"
    path.write_text("\n".join(rows) + "\n")
    imported = run(demo_url, "import-labels", str(path), "--campaign", "pilot")
    assert imported.exit_code in (0, 3), imported.output
    result = run(demo_url, "agreement", "--campaign", "pilot", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)  # strict: the CLI refuses NaN
    genre = report["questions"]["genre"]
    assert {"n_works", "n_labels", "krippendorff_alpha", "alpha_ci", "fleiss_kappa", "gwet_ac1",
            "percent_agreement", "labels"} <= set(genre)  # fmt: skip
    assert genre["n_works"] == 4 and genre["n_labels"] == 12
    cats = report["questions"]["categories"]
    assert cats["percent_agreement"] == 1.0
    assert cats["labels"]["Bibliometrics"]["krippendorff_alpha"] is None  # no variation
    # 4 common works per pair: every pair is reported (the old minimum of 10 dropped them all).
    kappas = {(p["a"], p["b"], p["question"]): (p["n"], p["cohen_kappa"]) for p in report["pairs"]}
    assert kappas[("ann", "bob", "about_ca_system")] == (4, 1.0)
    assert kappas[("ann", "cy", "genre")] == (4, 0.0)
    assert kappas[("ann", "bob", "genre")] == (4, None)  # one answer throughout: undefined
    assert len(kappas) == 9 and report["pairs_left_out"] == [] and report["min_pair_n"] == 2
    text = run(demo_url, "agreement", "--campaign", "pilot")
    assert "genre" in text.output and "bootstrap" in text.output
    assert "ann x bob  genre" in text.output and "kappa=-" in text.output
    strict = json.loads(run(demo_url, "agreement", "--campaign", "pilot", "--json",
                            "--min-pair-n", "5").stdout)  # fmt: skip
    assert strict["pairs"] == [] and strict["min_pair_n"] == 5
    assert len(strict["pairs_left_out"]) == 9
    assert strict["pairs_left_out"][0]["reason"] == (
        "4 common works, fewer than the minimum of 5 (--min-pair-n)"
    )
    text = run(demo_url, "agreement", "--campaign", "pilot", "--min-pair-n", "5").output
    assert "Pairs left out (fewer than 5 common works)" in text
    too_small = CliRunner().invoke(main, ["--db", demo_url, "agreement", "--min-pair-n", "1"])
    assert too_small.exit_code == 2 and "--min-pair-n" in too_small.output
    missing = CliRunner().invoke(main, ["--db", demo_url, "agreement", "--campaign", "nope"])
    assert missing.exit_code == 2


def test_estimates_refuse_a_score_order_and_estimate_a_sample(demo_url: str) -> None:
    refused = run(demo_url, "estimates", "--campaign", "demo-top")
    assert refused.exit_code == 0
    assert "not a probability sample" in refused.output
    sample = run(demo_url, "estimates", "--campaign", "demo-sample", "--json")
    assert sample.exit_code == 0
    report = json.loads(sample.stdout)
    assert report["estimable"] is True and report["population"] >= 150
    machines = run(demo_url, "machines", "--json")
    assert machines.exit_code == 0
    json.loads(machines.stdout)
