"""Synthetic frames: seed shape, schema-consistent vectors and calls, determinism, speed."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from labeling.frames.synth import BLOCK_SIZE, iter_synthetic_records, write_synthetic_frame
from labeling.frames.synth_scores import PREDICTION_STATUS, VALIDATION_STATUS
from labeling.schema import Schema, get_path, has_path


@pytest.fixture(scope="module")
def records(schema: Schema) -> list[dict[str, Any]]:
    """20,000 synthetic records (spans several blocks)."""
    return list(iter_synthetic_records(20_000, seed=7, schema=schema))


def _keys(node: Any) -> Any:
    """The nested key structure of a record (values dropped)."""
    if isinstance(node, dict):
        return {k: _keys(v) for k, v in node.items()}
    return None


def _read_lines(path: Path) -> list[dict[str, Any]]:
    """Records of a JSON Lines file, gzipped or not."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh.read().split("\n") if line]


def test_same_shape_as_seed(records: list[dict[str, Any]], seed_record: dict[str, Any]) -> None:
    """Every record has exactly the seed's keys, nesting and key order."""
    expected = _keys(seed_record)
    for rec in records[:500]:
        assert _keys(rec) == expected
        assert list(rec) == list(seed_record)
        assert list(rec["prediction"]) == list(seed_record["prediction"])
    rec = records[0]
    assert rec["prediction"]["prediction_status"] == PREDICTION_STATUS
    assert rec["prediction"]["model_version"] == "synth-v1"
    ms = rec["machine_scores"]
    assert ms["validation_status"] == VALIDATION_STATUS
    assert ms["provisional"] is True and ms["baseline"] is True
    assert ms["maturity_gate_passed"] is False and "never assert" in ms["note"]


def test_bibliographic_fields(records: list[dict[str, Any]]) -> None:
    """Ids are distinct W + digits; years, keywords and routes are plausible."""
    ids = [r["id"] for r in records]
    assert len(set(ids)) == len(ids)
    assert all(i[0] == "W" and i[1:].isdigit() and len(i) >= 10 for i in ids)
    assert all(1990 <= r["year"] <= 2025 for r in records)
    assert all(r["title"] and r["title"][0].isupper() for r in records)
    assert all(r["retraction"] is None and r["screen"] is None for r in records)
    assert all(r["direct_labels"] == [] for r in records)
    for r in records[:2000]:
        kws = r["keywords"].split("; ")
        assert 3 <= len(kws) <= 9 and len(set(kws)) == len(kws)
        routes = r["routes"]
        assert all(isinstance(v, bool) for v in routes.values())
        assert any(routes.values())
        assert routes["ca_aff"] == bool(r["ca_institutions"])
        assert routes["invisible_to_affiliation_only"] == (not routes["ca_aff"])
    assert any(r["ca_institutions"] for r in records)
    assert any(not r["has_abstract"] for r in records)


def test_vectors_and_scores_match_schema(records: list[dict[str, Any]], schema: Schema) -> None:
    """Score vectors have the schema's lengths and every score lies in [0, 1]."""
    for rec in records[:3000]:
        for q in schema.questions:
            for path in (*q.scores.values(), *q.calls.values()):
                assert has_path(rec, path), path
            for path in q.scores.values():
                value = get_path(rec, path)
                if q.kind == "binary":
                    assert isinstance(value, float) and 0.0 <= value <= 1.0
                else:
                    assert len(value) == len(q.labels)
                    assert all(0.0 <= v <= 1.0 for v in value)
        ms = rec["machine_scores"]
        assert 0.0 <= ms["score_opus"] <= 1.0 and 0.0 <= ms["score_gpt"] <= 1.0
        assert ms["score_spread"] == pytest.approx(abs(ms["score_opus"] - ms["score_gpt"]))
    lengths = {q.name: len(q.labels) for q in schema.questions if q.kind != "binary"}
    assert lengths == {"categories": 9, "domain": 6, "study_design": 12, "genre": 9}


def test_calls_follow_thresholds(records: list[dict[str, Any]], schema: Schema) -> None:
    """Candidate = union, consensus = intersection; single calls are arg-max except a few."""
    inconsistent = 0
    for rec in records:
        for q in schema.questions:
            a, b = (get_path(rec, q.scores[t]) for t in ("codex", "gemma"))
            cand, cons = get_path(rec, q.calls["candidate"]), get_path(rec, q.calls["consensus"])
            t = q.threshold
            if q.kind == "multi":
                trio = list(zip(q.labels, a, b, strict=True))
                assert cand == [lab for lab, x, y in trio if x >= t or y >= t]
                assert cons == [lab for lab, x, y in trio if x >= t and y >= t]
            elif q.kind == "binary":
                assert cand == (a >= t or b >= t) and cons == (a >= t and b >= t)
            else:
                calls = (get_path(rec, q.calls["codex"]), get_path(rec, q.calls["gemma"]))
                inconsistent += (calls[0] != q.labels[int(np.argmax(a))]) + (
                    calls[1] != q.labels[int(np.argmax(b))]
                )
                # Candidate and consensus follow the calls, thresholded on the calls' scores.
                sa, sb = a[q.labels.index(calls[0])], b[q.labels.index(calls[1])]
                best = calls[0] if sa >= sb else calls[1]
                assert cand == (best if max(sa, sb) >= t else None)
                both = calls[0] == calls[1] and min(sa, sb) >= t
                assert cons == (calls[0] if both else None)
    assert 0.002 < inconsistent / len(records) < 0.01  # default rate 0.5%


def test_inconsistent_rate_is_configurable(schema: Schema) -> None:
    """inconsistent_rate=0 gives arg-max calls everywhere."""
    for rec in iter_synthetic_records(3000, seed=1, schema=schema, inconsistent_rate=0.0):
        for q in schema.questions:
            if q.kind == "single":
                for t in ("codex", "gemma"):
                    call = get_path(rec, q.calls[t])
                    assert call == q.labels[int(np.argmax(get_path(rec, q.scores[t])))]


def test_score_distribution_shape(records: list[dict[str, Any]]) -> None:
    """Most works score near 0, a long tail scores high, and the two teachers agree."""
    opus = np.array([r["machine_scores"]["score_opus"] for r in records])
    gpt = np.array([r["machine_scores"]["score_gpt"] for r in records])
    score_max = np.maximum(opus, gpt)
    assert np.median(score_max) < 0.2
    assert 0.01 < (score_max > 0.8).mean() < 0.15
    assert np.corrcoef(opus, gpt)[0, 1] > 0.5
    codex = np.array([r["prediction"]["category_scores_codex"] for r in records])
    gemma = np.array([r["prediction"]["category_scores_gemma"] for r in records])
    assert np.median(codex.max(axis=1)) < 0.1
    assert (codex.max(axis=1) > 0.9).any()
    assert np.corrcoef(codex.ravel(), gemma.ravel())[0, 1] > 0.8
    has_candidate = np.mean([bool(r["prediction"]["candidate_categories"]) for r in records])
    assert 0.02 < has_candidate < 0.25


def test_model_version_and_seed_change_output(schema: Schema) -> None:
    """model_version is written; another seed gives other scores."""
    a = next(iter_synthetic_records(1, seed=1, schema=schema, model_version="m-2"))
    b = next(iter_synthetic_records(1, seed=2, schema=schema))
    assert a["prediction"]["model_version"] == "m-2"
    assert a["machine_scores"]["score_opus"] != b["machine_scores"]["score_opus"]


def test_deterministic_files(tmp_path: Path, schema: Schema) -> None:
    """Same n and seed give byte-identical files, whatever the number of workers."""
    n = 2 * BLOCK_SIZE + 17
    one = tmp_path / "a.jsonl"
    two = tmp_path / "b.jsonl"
    assert write_synthetic_frame(one, n, seed=5, schema=schema, workers=1) == n
    write_synthetic_frame(two, n, seed=5, schema=schema, workers=2)
    assert one.read_bytes() == two.read_bytes()
    assert not (tmp_path / "a.jsonl.part").exists()
    lines = _read_lines(one)
    assert len(lines) == n
    assert lines == list(iter_synthetic_records(n, seed=5, schema=schema))
    other = tmp_path / "c.jsonl"
    write_synthetic_frame(other, n, seed=6, schema=schema, workers=1)
    assert other.read_bytes() != one.read_bytes()


def test_gzip_output(tmp_path: Path, schema: Schema) -> None:
    """A .gz path gives a gzip file that reads back the same records, deterministically."""
    n = BLOCK_SIZE + 5
    gz1, gz2, plain = tmp_path / "f1.jsonl.gz", tmp_path / "f2.jsonl.gz", tmp_path / "f.jsonl"
    write_synthetic_frame(gz1, n, seed=3, schema=schema, workers=1)
    write_synthetic_frame(gz2, n, seed=3, schema=schema, workers=2)
    write_synthetic_frame(plain, n, seed=3, schema=schema)
    assert gz1.read_bytes()[:2] == b"\x1f\x8b"
    assert hashlib.sha256(gz1.read_bytes()).digest() == hashlib.sha256(gz2.read_bytes()).digest()
    assert gzip.decompress(gz1.read_bytes()) == plain.read_bytes()
    assert len(_read_lines(gz1)) == n
    empty = tmp_path / "empty.jsonl.gz"
    assert write_synthetic_frame(empty, 0, schema=schema) == 0
    assert gzip.decompress(empty.read_bytes()) == b""
