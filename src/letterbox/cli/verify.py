# `letterbox verify`: the offline check (fsck) of a stopped broker's data dir. It takes the
# data dir's lock, so a running broker's directory is refused, reads every file
# (storage/verify.py) and prints one line per damaged file, topic and entry range.
# Exit status: 0 nothing damaged, 1 damage found, 2 a usage error (no data dir, in use).
from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

import click

from letterbox.storage.data_dir_lock import DataDirectoryInUse, DataDirLock
from letterbox.storage.schema import db_path
from letterbox.storage.verify import verify_data_dir
from letterbox.usage_errors import OneLineUsageError


def held_data_dir(data_dir: Path, must_exist: bool = True) -> DataDirLock:
    """The lock of a data dir no broker runs on (a usage error otherwise)."""
    if data_dir.exists() and not data_dir.is_dir():
        raise OneLineUsageError(f"{data_dir} is a file: give the broker's --data-dir")
    if must_exist and not db_path(data_dir).is_file():
        raise OneLineUsageError(f"{data_dir} holds no letterbox.db: give the broker's --data-dir")
    lock = DataDirLock(data_dir)
    try:
        lock.acquire("letterbox CLI")
    except DataDirectoryInUse as exc:
        raise OneLineUsageError(f"{exc} (this command works on a stopped broker's data dir)") from None
    except OSError as exc:
        raise OneLineUsageError(f"cannot use {data_dir}: {exc.strerror or exc}") from None
    return lock


@click.command()
@click.option("--data-dir", type=click.Path(path_type=Path), default=Path("data"), show_default=True,
              help="The stopped broker's data directory.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def verify(data_dir: Path, as_json: bool) -> None:
    """Check every file of a stopped broker's data dir; report what is damaged by topic and range."""
    lock = held_data_dir(data_dir)
    try:
        report = verify_data_dir(data_dir)
    finally:
        lock.release()
    if as_json:
        click.echo(json.dumps({"damaged": report.damaged, "topics": report.topics, "entries": report.entries,
                               "payload_files": report.payload_files, "seconds": round(report.seconds, 3),
                               "findings": [asdict(f) for f in report.findings]}))
    else:
        for finding in report.findings:
            click.echo(finding.line())
        verdict = "DAMAGED" if report.damaged else "ok"
        click.echo(f"{verdict}: {report.topics} topics, {report.entries} entries, {report.payload_files} payload "
                   f"files checked in {report.seconds:.1f} s")
    sys.exit(1 if report.damaged else 0)
