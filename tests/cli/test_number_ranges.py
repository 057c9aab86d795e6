"""Every number a command takes is range-checked before the database: exit 2, one line."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from labeling.cli.main import main
from labeling.database import dispose_all
from labeling.review.campaigns import CampaignError
from labeling.review.filters import validate_filter
from tests.conftest import make_record, write_jsonl

HUGE = "99999999999999999999"
FILTERS = {
    "year beyond 64 bits": f'{{"year_min": {HUGE}}}',
    "year beyond 32 bits": '{"year_max": 2147483648}',
    "negative year beyond 32 bits": '{"year_min": -2147483649}',
    "score infinity": '{"score_max": [0, 1e999]}',
    "score beyond a double": '{"score_opus": [' + "1" + "0" * 400 + ", null]}",
    "integer beyond Python's digit limit": '{"year_min": 1' + "0" * 5000 + "}",
}
OPTIONS = {
    "seed": ["campaigns", "create", "c", "--seed", HUGE],
    "negative seed": ["campaigns", "create", "c", "--strategy", "random", "-n", "2",
                      "--seed", "-1"],
    "overlap": ["campaigns", "create", "c", "-k", "3000000000"],
    "sample size": ["campaigns", "create", "c", "-n", HUGE],
    "allocation": ["campaigns", "create", "c", "--strategy", "stratified", "--allocation", HUGE],
    "lease": ["campaigns", "create", "c", "--lease-minutes", "1e300"],
    "gold rate NaN": ["campaigns", "create", "c", "--gold-rate", "nan"],
    "assist rate inf": ["campaigns", "create", "c", "--assist-rate", "inf"],
    "posterior NaN": ["campaigns", "create", "c", "--rule", "dawid-skene", "--posterior", "nan"],
    "bins NaN": ["campaigns", "create", "c", "--strategy", "stratified", "-n", "2",
                 "--bins", "0,nan,1"],
    "n-boot": ["agreement", "--n-boot", HUGE],
    "agreement seed": ["agreement", "--seed", "-5"],
    "min-pair-n": ["agreement", "--min-pair-n", HUGE],
    "limit": ["abstracts", "prefetch", "--campaign", "c", "--limit", HUGE],
    "processes": ["export", "--format", "csv", "--out", "x.csv", "--processes", HUGE],
    "batch size": ["import-frame", "f.jsonl", "--batch-size", HUGE],
    "workers": ["import-frame", "f.jsonl", "--workers", HUGE],
    "synth n": ["synth", "--n", HUGE, "--out", "x.jsonl"],
    "synth seed": ["synth", "--n", "1", "--out", "x.jsonl", "--seed", "-1"],
    "sso id": ["sso", "remove", HUGE],
    "half-width NaN": ["plan", "--campaign", "c", "--half-width", "nan"],
}  # fmt: skip


@pytest.fixture
def url(db_url: str, seed_record, tmp_path) -> str:
    """A database (both engines) with three works, so a campaign would queue them."""
    frame = write_jsonl(
        tmp_path / "f.jsonl", [make_record(seed_record, f"W{i}") for i in (1, 2, 3)]
    )
    result = CliRunner().invoke(main, ["--db", db_url, "import-frame", str(frame)])
    assert result.exit_code == 0, result.output
    return db_url


def one_line_exit_2(url: str, args: list[str]) -> str:
    """Run the command; assert exit 2 and a single `error:` line; return it."""
    result = CliRunner().invoke(main, ["--db", url, *args])
    dispose_all()
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and result.exception is not None
    assert isinstance(result.exception, SystemExit), result.exception
    lines = result.output.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


@pytest.mark.parametrize("case", FILTERS)
def test_campaign_filter_numbers_out_of_range(url: str, case: str) -> None:
    line = one_line_exit_2(url, ["campaigns", "create", "g1", "--filter", FILTERS[case]])
    assert "filter" in line
    listed = CliRunner().invoke(main, ["--db", url, "campaigns", "list"])
    assert "g1" not in listed.output  # nothing created


@pytest.mark.parametrize("case", OPTIONS)
def test_numeric_options_out_of_range(url: str, case: str, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # the files some commands name, were they ever written
    line = one_line_exit_2(url, OPTIONS[case])
    assert "range" in line or "finite" in line or "not in 1.." in line, line


def test_the_page_filter_is_checked_the_same_way() -> None:
    # The Campaigns page builds a dict and create_campaign runs validate_filter on it.
    for bad in ({"year_min": 2**40}, {"year_max": -(2**31) - 1}, {"score_max": [float("inf"), 1]},
                {"score_gpt": [0, 10**400]}, {"year_min": True}):  # fmt: skip
        with pytest.raises(CampaignError):
            validate_filter(bad)
    assert validate_filter({"year_min": -(2**31), "year_max": 2**31 - 1}) == {
        "year_min": -(2**31), "year_max": 2**31 - 1}  # fmt: skip


def test_in_range_values_still_work(url: str) -> None:
    args = ["campaigns", "create", "ok", "--seed", str(2**31 - 1), "--strategy", "random",
            "-n", "2", "--filter", '{"year_min": 1900, "score_max": [0, 1]}']  # fmt: skip
    result = CliRunner().invoke(main, ["--db", url, *args])
    assert result.exit_code == 0, result.output
