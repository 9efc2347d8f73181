# The root `letterbox` group with its subcommands imported when they are named: `letterbox
# standalone` (the broker) never imports the admin, migrate, Spark or client commands, so a
# broker's start-up pays only for the broker. Each lazy entry names the module that defines
# the command and the attribute holding it, plus modules imported only to register further
# subcommands on it (`dlq replay`, `dlq groups`).
# Invariant: `letterbox --help` and every `get_command` see the same set of names as an eager
# registration would; a name is imported at most once (click keeps it in `commands` after).
from __future__ import annotations

import importlib
from dataclasses import dataclass

import click

from letterbox.usage_errors import OneLineCommand


@dataclass(frozen=True)
class Lazy:
    module: str
    attr: str
    also: tuple[str, ...] = ()  # modules that add subcommands to it when imported


class LazyGroup(OneLineCommand):
    def __init__(self, *args: object, lazy: dict[str, Lazy] | None = None, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy: dict[str, Lazy] = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            self.add_command(self.load(cmd_name), cmd_name)
        return self.commands.get(cmd_name)

    def load(self, name: str) -> click.Command:
        entry = self.lazy[name]
        command = getattr(importlib.import_module(entry.module), entry.attr)
        for extra in entry.also:
            importlib.import_module(extra)
        if not isinstance(command, click.Command):
            raise TypeError(f"{entry.module}.{entry.attr} is not a click command")
        return command
