# The `letterbox` command. `letterbox standalone` runs the broker; flags map
# onto BrokerConfig fields (see config.py for file and LETTERBOX_* env vars).
from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import click

from letterbox.config import BrokerConfig, ConfigError
from letterbox.storage.data_dir_lock import DataDirLock


@click.group()
@click.version_option(package_name="letterbox")
def main() -> None:
    """letterbox: a Pulsar-protocol message broker built around failure handling."""


@main.command()
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), help="Where topics and cursors are stored [data].")
@click.option("--port", type=int, help="Pulsar binary protocol port [6650]; 0 picks a free port.")
@click.option("--bind", help="Address to listen on [0.0.0.0].")
@click.option("--admin-port", type=int, help="Admin HTTP port [8080]; 0 picks a free port.")
@click.option("--advertised-address", help="Host name clients are told to connect to.")
@click.option("--sync", type=click.Choice(["full", "normal", "off"]), help="Durability of receipts [full].")
@click.option("--config", "config_file", type=click.Path(dir_okay=False, exists=True, path_type=Path), help="TOML config file.")
@click.option("--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))
def standalone(
    data_dir: Path | None,
    port: int | None,
    bind: str | None,
    admin_port: int | None,
    advertised_address: str | None,
    sync: str | None,
    config_file: Path | None,
    log_level: str | None,
) -> None:
    """Run a standalone broker."""
    try:
        config = BrokerConfig.load(
            config_file,
            overrides={
                "data_dir": data_dir,
                "port": port,
                "bind": bind,
                "admin_port": admin_port,
                "advertised_address": advertised_address,
                "sync": sync,
                "log_level": log_level.upper() if log_level else None,
            },
        )
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    logging.basicConfig(
        level=config.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    try:
        DataDirLock(config.data_dir).probe()  # a directory in use fails before the broker's imports
        from letterbox.standalone import run

        asyncio.run(run(config))
    except OSError as exc:
        raise click.ClickException(f"cannot start the broker: {exc}") from None


def _register() -> None:
    from letterbox.cli.admin import admin
    from letterbox.cli.client import consume, produce
    from letterbox.cli.dlq import dlq
    from letterbox.perf import perf

    main.add_command(perf)
    main.add_command(admin)
    main.add_command(dlq)
    main.add_command(produce)
    main.add_command(consume)
    main.add_command(__import__("letterbox.spark.cli_pipeline", fromlist=["pipeline"]).pipeline)


_register()

if __name__ == "__main__":
    main()
