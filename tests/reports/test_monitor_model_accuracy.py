"""The Monitor's count of works that two or more annotators labelled (the model's overlap)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from labeling.reports.monitor import model_accuracy as mm
from labeling.stats import overlap


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("categorical", [False, True])
def test_shared_works_counts_works_with_two_annotators(seed: int, categorical: bool) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 200))
    long = pd.DataFrame(
        {
            "work_id": rng.integers(0, 40, size=n).astype(str),
            "annotator": rng.choice(["ann", "bob", "cy"], size=n),
            "question": rng.choice(["genre", "domain"], size=n),
        }
    )
    if categorical:
        long = long.astype({"work_id": "category", "annotator": "category"})
    want = int((long.groupby("work_id", observed=True)["annotator"].nunique() >= 2).sum())
    assert mm.shared_works(long) == want


@pytest.mark.parametrize("seed", range(4))
def test_both_ways_of_counting_agree(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(seed)
    long = pd.DataFrame(
        {
            "work_id": rng.integers(0, 500, size=900).astype(str),
            "annotator": rng.choice([f"u{i}" for i in range(30)], size=900),
        }
    )
    marked = mm.shared_works(long)
    monkeypatch.setattr(overlap, "MARK_CELLS", 0)  # too many cells: sorted pairs instead
    assert mm.shared_works(long) == marked
