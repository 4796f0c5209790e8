"""docs/deployment.md sizes a machine with the figures of docs/performance.md, which come
from the committed benchmark reports: each figure the sizing table gives is checked to be
on the performance page as well (``FIGURES``: the deployment page's words, then the
performance page's), so a re-measured figure there cannot leave a stale one here."""

from __future__ import annotations

from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"

FIGURES = [
    ("| 66 M zipformer2 (2023-06-26), int8 | 12 | 48 % of a core | 414 MB before the first "
     "client, 3.08 MB per active stream |",
     ["holds 12 clients of the 66 M int8 model", "| 66 M int8 | 12 |", "**48.3**",
      "414 MB before the first client and\n3.08 MB per active stream on the 66 M int8 model"]),
    ("| 20 M zipformer (2023-02-17), int8 | 32 | 65 % of a core | 292 MB before the first "
     "client, 1.83 MB per active stream |",
     ["32 of the 20 M int8 model", "| 20 M int8 | 32 |", "**65.2**",
      "292 MB and 1.83 MB on the 20 M one"]),
    ("On the 2-vCPU machine above a second process did not\npay on the 66 M model",
     ["on 2 cores a second process does not pay on this model"]),
]


@pytest.mark.parametrize("shown,source", FIGURES, ids=["66M", "20M", "workers"])
def test_the_sizing_figures_are_the_performance_pages(shown, source):
    deployment = (DOCS / "deployment.md").read_text(encoding="utf-8")
    performance = (DOCS / "performance.md").read_text(encoding="utf-8")
    assert shown in deployment
    for words in source:
        assert words in performance, words
