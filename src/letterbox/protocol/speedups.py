# Which codec the hot path uses: the compiled extensions (setup.py; built by `make` and by pip)
# or the pure-Python references beside them. LETTERBOX_PURE_PYTHON=1 forces the references
# (the parity tests run both). `make test` builds the extensions, and tests/protocol fails if
# they are missing there, so a broken build cannot fall back silently.
# crc32c (the CRC32C of frames and stored entries) is the send codec's when it is built, else the
# crc32c package's: the package is imported only then (its import reads package metadata, a
# noticeable share of a broker's start).
from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from types import ModuleType
from typing import cast


def _load(name: str) -> ModuleType | None:
    if os.environ.get("LETTERBOX_PURE_PYTHON") == "1":
        return None
    try:
        return importlib.import_module(f"letterbox.protocol.{name}")
    except ImportError:
        return None


send_codec = _load("_send_codec")
consumer_codec = _load("_consumer_codec")


Checksum = Callable[[bytes | bytearray | memoryview], int]


def _crc32c() -> Checksum:
    if send_codec is not None:
        return cast(Checksum, send_codec.crc32c)
    from crc32c import crc32c as package_crc32c

    return package_crc32c


crc32c = _crc32c()
