"""streamdec.search.beam_utils.top_k_stable: each row's k best columns in the order of a
stable descending sort, found without sorting the whole row (modified beam search ranks
every stream's hypotheses x vocabulary with it at every frame)."""

import numpy as np
import pytest

from streamdec.search.beam_utils import top_k_stable

INF, NAN = np.inf, np.nan

# (scores, k, expected): ties keep column order, at the k-th place too
CASES = [
    ([[1.0, 3.0, 2.0]], 2, [[1, 2]]),
    ([[2.0, 2.0, 2.0, 2.0]], 2, [[0, 1]]),  # all tied: the first columns
    ([[0.0, 5.0, 1.0, 5.0, 1.0]], 3, [[1, 3, 2]]),  # a tie at the k-th place: the first
    ([[-INF, 0.0, -INF, -1.0]], 3, [[1, 3, 0]]),  # -inf padding ranks last, in order
    ([[-INF, -INF, -INF]], 2, [[0, 1]]),
    ([[NAN, 1.0, NAN, 0.0]], 3, [[1, 3, 0]]),  # NaN after every number, as argsort puts it
    ([[1.0, 2.0]], 5, [[1, 0]]),  # k past the row: the whole row
    ([[3.0, 1.0, 2.0], [0.0, 0.0, 9.0]], 2, [[0, 2], [2, 0]]),  # each row on its own
]


@pytest.mark.parametrize("scores, k, expected", CASES)
def test_top_k_stable_cases(scores, k, expected):
    assert top_k_stable(np.array(scores), k) == expected


@pytest.mark.parametrize("kind", ["normal", "ties", "ties_and_inf", "nan_and_inf"])
def test_top_k_stable_is_the_stable_sorts_prefix(kind):
    """The same indices as ``np.argsort(-scores, kind="stable")[:, :k]`` on 500 random
    arrays of each kind (seeded)."""
    rng = np.random.default_rng({"normal": 1, "ties": 2, "ties_and_inf": 3,
                                 "nan_and_inf": 4}[kind])
    for _ in range(500):
        n, m, k = int(rng.integers(1, 12)), int(rng.integers(1, 40)), int(rng.integers(1, 9))
        if kind == "normal":
            a = rng.standard_normal((n, m)) - 1000.0
        elif kind == "ties":
            a = rng.integers(-3, 3, (n, m)).astype(np.float64)
        elif kind == "ties_and_inf":
            a = rng.integers(-2, 2, (n, m)).astype(np.float64)
            a[a < 0] = -INF
        else:
            a = rng.standard_normal((n, m))
            a[rng.random((n, m)) < 0.3] = NAN
            a[rng.random((n, m)) < 0.2] = -INF
        assert top_k_stable(a, k) == np.argsort(-a, axis=1, kind="stable")[:, :k].tolist()
