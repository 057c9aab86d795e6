"""Cohen's kappa from a contingency table is scikit-learn's, float for float."""

from __future__ import annotations

import numpy as np
import pytest

from labeling.stats.coefficients import kappa_from_table, sklearn_kappa


def _sklearn(table: np.ndarray) -> float | None:
    """scikit-learn's kappa of the table's cells, passed as weighted pairs."""
    v = table.shape[0]
    cells = table.reshape(-1)
    nz = np.flatnonzero(cells)
    if not len(nz):
        return None
    return sklearn_kappa(nz // v, nz % v, sample_weight=cells[nz])


@pytest.mark.parametrize("seed", range(40))
def test_random_tables(seed: int) -> None:
    rng = np.random.default_rng(seed)
    v = int(rng.integers(2, 9))
    table = rng.integers(0, 6, (v, v)) * (rng.random((v, v)) < 0.6)
    if seed % 5 == 0:
        table[:, 0] = table[0, :] = 0  # a label nobody used
    assert kappa_from_table(table) == _sklearn(table)


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        (np.array([[3, 0], [0, 0]]), None),  # one label only: undefined
        (np.zeros((3, 3), dtype=int), None),
        (np.array([[2, 0], [0, 2]]), 1.0),
        (np.array([[0, 2], [2, 0]]), -1.0),
    ],
)
def test_edge_tables(table: np.ndarray, expected: float | None) -> None:
    assert kappa_from_table(table) == expected
    if table.sum():
        assert _sklearn(table) == expected
