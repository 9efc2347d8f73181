# `letterbox backup DEST` and `letterbox restore BACKUP`: a consistent copy of a data dir,
# running broker or not, read from its files (storage/backup.py says how the copy stays
# consistent), and its return into a data dir no broker holds.
from __future__ import annotations

from pathlib import Path

import click

from letterbox.cli.verify import held_data_dir
from letterbox.storage.backup import BackupError, backup_data_dir, restore_data_dir
from letterbox.storage.verify import verify_data_dir
from letterbox.usage_errors import OneLineUsageError

DATA_DIR = click.option("--data-dir", type=click.Path(path_type=Path), default=Path("data"),
                        show_default=True, help="The broker's data directory.")


@click.command()
@click.argument("dest", type=click.Path(path_type=Path))
@DATA_DIR
def backup(dest: Path, data_dir: Path) -> None:
    """Copy a data dir (the broker may be running) into DEST, a new or empty directory."""
    try:
        result = backup_data_dir(data_dir, dest)
    except BackupError as exc:
        raise OneLineUsageError(str(exc)) from None
    except OSError as exc:
        raise OneLineUsageError(f"cannot copy {data_dir} to {dest}: {exc}; check both paths and the free "
                                "space") from None
    click.echo(f"backed up {data_dir} to {dest}: letterbox.db {result.db_bytes} bytes, {result.payload_files} "
               f"payload files ({result.payload_bytes} bytes) in {result.seconds:.1f} s")


@click.command()
@click.argument("source", metavar="BACKUP", type=click.Path(path_type=Path))
@DATA_DIR
@click.option("--force", is_flag=True, help="Restore into a non-empty data dir (its files are moved aside).")
def restore(source: Path, data_dir: Path, force: bool) -> None:
    """Bring a backup back into a stopped broker's data dir."""
    report = verify_data_dir(source) if (source / "letterbox.db").is_file() else None
    if report is not None and report.damaged:
        raise OneLineUsageError(f"the backup {source} is damaged ({report.findings[0].line()}); "
                                "restore another backup")
    lock = held_data_dir(data_dir, must_exist=False)
    try:
        aside = restore_data_dir(source, data_dir, force)
    except BackupError as exc:
        raise OneLineUsageError(str(exc)) from None
    except OSError as exc:
        raise OneLineUsageError(f"cannot restore into {data_dir}: {exc}; check the path and the free space") from None
    finally:
        lock.release()
    moved = f"; the files it held were moved to {aside}" if aside else ""
    click.echo(f"restored {source} into {data_dir}{moved}")
