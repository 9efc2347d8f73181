# The `letterbox` command. `letterbox standalone` runs the broker; flags map
# onto BrokerConfig fields (see config.py for file and LETTERBOX_* env vars).
from __future__ import annotations

import asyncio
import gc
import logging
import sys
from pathlib import Path
from typing import Any

import click

from letterbox.cli.lazy_group import Lazy, LazyGroup
from letterbox.cli.standalone_options import PORT, security_options, security_overrides
from letterbox.config import BrokerConfig, ConfigError
from letterbox.security.pulsar_config import PulsarConfigError, read_pulsar_config
from letterbox.storage.data_dir_lock import DataDirLock
from letterbox.storage.errors import DataDirDamaged
from letterbox.usage_errors import OneLineUsageError

# Every command but `standalone`, imported when named (cli/lazy_group.py).
COMMANDS = {
    "admin": Lazy("letterbox.cli.admin", "admin"),
    "backup": Lazy("letterbox.cli.backup", "backup"),
    "consume": Lazy("letterbox.cli.client", "consume"),
    "dlq": Lazy("letterbox.cli.dlq", "dlq", also=("letterbox.cli.dlq_edit", "letterbox.cli.dlq_groups")),
    "import": Lazy("letterbox.cli.bring_home", "import_"),
    "migrate": Lazy("letterbox.cli.migrate", "migrate"),
    "perf": Lazy("letterbox.cli.perf", "perf"),
    "pipeline": Lazy("letterbox.cli.pipeline", "pipeline"),
    "produce": Lazy("letterbox.cli.client", "produce"),
    "redrive-back": Lazy("letterbox.cli.bring_home", "redrive_back"),
    "restore": Lazy("letterbox.cli.backup", "restore"),
    "tokens": Lazy("letterbox.cli.tokens", "tokens"),
    "verify": Lazy("letterbox.cli.verify", "verify"),
}


@click.group(cls=LazyGroup, lazy=COMMANDS)
@click.version_option(package_name="letterbox-broker")
@click.pass_context
def main(ctx: click.Context) -> None:
    """letterbox: a Pulsar-protocol message broker built around failure handling."""
    # The collector stays off through a broker's start (standalone.tune_gc turns it on once
    # the broker has started); every other command runs with it on.
    if ctx.invoked_subcommand == "standalone":
        gc.disable()
    else:
        gc.enable()


@main.command()
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), help="Where topics and cursors are stored [data].")
@click.option("--port", type=PORT, help="Pulsar binary protocol port [6650]; 0 picks a free port, 'off' none.")
@click.option("--bind", help="Address to listen on [127.0.0.1]; 0.0.0.0 opens the broker to the network.")
@click.option("--admin-port", type=PORT, help="Admin HTTP port [8080]; 0 picks a free port, 'off' none.")
@click.option("--advertised-address", help="Host name clients are told to connect to.")
@click.option("--sync", type=click.Choice(["full", "normal", "off"]), help="Durability of receipts [full].")
@click.option("--config", "config_file", type=click.Path(dir_okay=False, exists=True, path_type=Path), help="TOML config file.")
@click.option("--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))
@click.option("--clock", type=click.Choice(["real", "manual"]),
              help="The broker's clock [real]; manual (tests only) moves only through "
              "POST /admin/v2/letterbox/clock/advance and needs --allow-test-clock.")
@click.option("--allow-test-clock/--no-allow-test-clock", "allow_test_clock", default=None,
              help="Allow --clock manual (see docs/testing.md).")
@click.option("--pulsar-compatible-only/--no-pulsar-compatible-only", "pulsar_compatible_only", default=None,
              help="Switch every letterbox-only extension off, as an Apache Pulsar broker "
              "(docs/retry-and-terminate.md).")
@security_options
def standalone(
    data_dir: Path | None,
    port: int | None,
    bind: str | None,
    admin_port: int | None,
    advertised_address: str | None,
    sync: str | None,
    config_file: Path | None,
    log_level: str | None,
    clock: str | None,
    allow_test_clock: bool | None,
    pulsar_compatible_only: bool | None,
    pulsar_config: Path | None,
    **security: Any,
) -> None:
    """Run a standalone broker."""
    try:
        pulsar = read_pulsar_config(pulsar_config) if pulsar_config else None
    except PulsarConfigError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        config = BrokerConfig.load(
            config_file,
            pulsar_settings=pulsar.values if pulsar else None,
            overrides={
                **security_overrides(security),
                "data_dir": data_dir,
                "port": port,
                "bind": bind,
                "admin_port": admin_port,
                "advertised_address": advertised_address,
                "sync": sync,
                "log_level": log_level.upper() if log_level else None,
                "clock": clock,
                "allow_test_clock": allow_test_clock,
                "pulsar_compatible_only": pulsar_compatible_only,
            },
        )
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    logging.basicConfig(
        level=config.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    if pulsar is not None and pulsar.ignored:
        logging.getLogger("letterbox").info(
            "Pulsar config %s: ignored %d setting(s) letterbox does not support: %s",
            pulsar_config, len(pulsar.ignored), ", ".join(pulsar.ignored),
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
    except ConfigError as exc:  # a key, certificate or htpasswd file that cannot be used
        raise click.UsageError(str(exc)) from None
    except DataDirDamaged as exc:  # a start-up integrity check failed: the message names the file
        raise OneLineUsageError(f"the broker does not start: {exc}") from None
    except OSError as exc:
        raise click.ClickException(f"cannot start the broker: {exc}") from None



if __name__ == "__main__":
    main()
