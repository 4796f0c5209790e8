"""Shared fixtures: random-weight test models in three state layouts (exported once per
session) and recognizers over them."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import model_factory  # noqa: E402
from hypothesis import settings  # noqa: E402

from streamdec import ModelConfig, Recognizer, RecognizerConfig  # noqa: E402

# property-based tests (tests/test_properties_*.py): the same examples on every run, none
# timed; STREAMDEC_HYPOTHESIS_EXAMPLES=5000 tries more of them locally
settings.register_profile(
    "streamdec", max_examples=int(os.environ.get("STREAMDEC_HYPOTHESIS_EXAMPLES", "60")),
    deadline=None, derandomize=True, database=None, print_blob=True)
settings.load_profile("streamdec")

# every server a test starts stores its transcripts in a folder of this run's, never in the
# user's data directory (the cache of downloaded models and compiled words stays shared)
if "XDG_DATA_HOME" not in os.environ and "STREAMDEC_HOME" not in os.environ:
    import tempfile
    os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="streamdec-test-data-")

LAYOUTS = tuple(model_factory.ENCODERS)


@pytest.fixture(scope="session")
def model_dirs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    return {layout: model_factory.export_test_model(layout, root / layout) for layout in LAYOUTS}


def make_recognizer(model_dir: Path, **overrides) -> Recognizer:
    return Recognizer(RecognizerConfig(model=ModelConfig(model_dir=str(model_dir)), **overrides))


@pytest.fixture(scope="session", params=LAYOUTS)
def layout_recognizer(request, model_dirs) -> Recognizer:
    return make_recognizer(model_dirs[request.param])
