# Which codec the hot path uses: the compiled extensions (setup.py; built by `make` and by pip)
# or the pure-Python references beside them. LETTERBOX_PURE_PYTHON=1 forces the references
# (the parity tests run both). `make test` builds the extensions, and tests/protocol fails if
# they are missing there, so a broken build cannot fall back silently.
from __future__ import annotations

import importlib
import os
from types import ModuleType


def _load(name: str) -> ModuleType | None:
    if os.environ.get("LETTERBOX_PURE_PYTHON") == "1":
        return None
    try:
        return importlib.import_module(f"letterbox.protocol.{name}")
    except ImportError:
        return None


send_codec = _load("_send_codec")
consumer_codec = _load("_consumer_codec")
