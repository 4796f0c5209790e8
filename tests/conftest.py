"""Shared fixtures: random-weight test models in three state layouts (exported once per
session) and recognizers over them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import model_factory  # noqa: E402

from streamdec import ModelConfig, Recognizer, RecognizerConfig  # noqa: E402

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
