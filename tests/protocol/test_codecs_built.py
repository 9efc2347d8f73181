"""The compiled codecs (setup.py) are built and in use: `make test` builds them in place, so a
broken build fails here instead of falling back to the pure-Python references unnoticed."""
from __future__ import annotations

import os
import subprocess
import sys

from letterbox.protocol import speedups


def test_compiled_codecs_are_in_use() -> None:
    assert os.environ.get("LETTERBOX_PURE_PYTHON") != "1"
    assert speedups.send_codec is not None, "letterbox.protocol._send_codec is not built: run `make codecs`"
    assert speedups.consumer_codec is not None, "letterbox.protocol._consumer_codec is not built: run `make codecs`"
    assert speedups.send_codec.__file__ is not None and speedups.send_codec.__file__.endswith(".so")


def test_pure_python_switch_turns_them_off() -> None:
    code = "from letterbox.protocol import speedups; print(speedups.send_codec, speedups.consumer_codec)"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "LETTERBOX_PURE_PYTHON": "1"},
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == ["None", "None"]
