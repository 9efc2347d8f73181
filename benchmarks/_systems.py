# The two Pulsar-protocol brokers the benchmarks put side by side, behind one face: start(),
# stop(), pid, service_url, admin_url, name, and started_at (monotonic time of the start, for
# "start to first receipt"). Both run with fsync before the receipt: letterbox `--sync full`,
# Apache Pulsar standalone as the conformance harness starts it (journalSyncData=true).
# `fresh()` gives one on a new temporary data directory and removes it after: a sitting writes
# gigabytes, and nothing of it may be left behind.
from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from _broker import Broker

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from conformance import reference  # noqa: E402  (the repository's own reference-broker module)


class Pulsar:
    """Apache Pulsar standalone, as the conformance harness starts it."""

    name = "pulsar"

    def __init__(self, tmp: Path) -> None:
        self.ref = reference.PulsarReference(data_dir=tmp / "pulsar")
        self.started_at = 0.0

    def start(self) -> None:
        self.started_at = time.monotonic()
        self.ref.start()

    @property
    def pid(self) -> int:
        assert self.ref.pid is not None
        return self.ref.pid

    @property
    def service_url(self) -> str:
        return self.ref.service_url

    url = service_url

    @property
    def admin_url(self) -> str:
        return self.ref.admin_url

    def stop(self) -> None:
        self.ref.stop()


class Letterbox:
    name = "letterbox"

    def __init__(self, tmp: Path) -> None:
        self.port = reference.free_port()  # known before the start, as Pulsar's is
        self.broker = Broker(tmp / "data", sync="full", log=tmp / "broker.log", port=self.port)
        self.started_at = 0.0

    def start(self) -> None:
        self.started_at = time.monotonic()
        self.broker.start()

    @property
    def pid(self) -> int:
        return self.broker.pid

    @property
    def service_url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        return self.broker.admin_url()

    def stop(self) -> None:
        self.broker.stop()


System = Pulsar | Letterbox


@contextlib.contextmanager
def fresh(kind: str, prefix: str) -> Iterator[System]:
    """A "pulsar" or "letterbox" system on a new temporary data directory, not yet started;
    stopped (whether it started or not) and its directory removed on leaving."""
    tmp = Path(tempfile.mkdtemp(prefix=f"{prefix}-"))
    system: System = Pulsar(tmp) if kind == "pulsar" else Letterbox(tmp)
    try:
        yield system
    finally:
        system.stop()
        shutil.rmtree(tmp, ignore_errors=True)
