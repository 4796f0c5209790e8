"""Every exception streamdec raises on purpose is one class of ``streamdec.errors``' tree:
defined there (nowhere else in the package), a ``StreamdecError``, and drawn in the
module's docstring."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from streamdec import errors

PACKAGE = Path(__file__).resolve().parents[1] / "streamdec"

CLASSES = ["StreamdecError", "ConfigError", "OptionError", "ModelLoadError", "ModelDownloadError",
           "AudioInputError",
           "AudioFileError", "MicrophoneError", "StreamStateError", "TokenizeError",
           "DecodeError", "ClientError", "EventRefused", "UploadError", "StoreError",
           "BatchRewriteRefused",
           "Disconnected"]


def test_the_tree_is_these_classes_each_a_streamdec_error_drawn_in_the_docstring():
    defined = [name for name, value in vars(errors).items()
               if inspect.isclass(value) and issubclass(value, BaseException)
               and value.__module__ == errors.__name__]
    assert sorted(defined) == sorted(CLASSES)
    for name in CLASSES:
        assert issubclass(getattr(errors, name), errors.StreamdecError), name
        drawn = f"    {name}\n" if name == "StreamdecError" else f"── {name} "
        assert drawn in errors.__doc__, name


def test_no_exception_class_outside_errors_py():
    outside = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "errors.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(b, ast.Name) and (b.id.endswith(("Error", "Exception"))
                                                 or b.id in CLASSES) for b in node.bases):
                outside.append(f"{path.relative_to(PACKAGE)}: {node.name}")
    assert outside == []


def test_the_old_homes_still_export_them():
    from streamdec.files.audio_file import AudioFileError
    from streamdec.microphone import MicrophoneError
    from streamdec.server.connection import ClientError, Disconnected
    from streamdec.server.options import OptionError
    from streamdec.server.transcription import UploadError

    assert (AudioFileError, MicrophoneError, ClientError, Disconnected, OptionError,
            UploadError) == (errors.AudioFileError, errors.MicrophoneError,
                             errors.ClientError, errors.Disconnected, errors.OptionError,
                             errors.UploadError)
