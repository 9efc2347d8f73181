# A usage error of the command line said in one line: `Error: <what is wrong and
# how to fix it>` on stderr and exit status 2 (click's status for usage errors),
# without click's usage and help lines, so the fix is the one thing shown.
# Invariant: the message never carries a secret given on the command line (a
# token is named by where it came from, never echoed).
from __future__ import annotations

import sys
from typing import IO, Any

import click


class OneLineUsageError(click.UsageError):
    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"Error: {self.format_message()}", file=file, err=True)


class OneLineCommand(click.Group):
    """The root `letterbox` group: every usage error of any subcommand (an unknown option, a
    missing argument, a value not among the choices) is said as OneLineUsageError says it, with
    where to find the help at the end of the same line; other errors as click says them."""

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except click.UsageError as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":  # a bare group: its help, as click shows it
                exc.show()
                sys.exit(exc.exit_code)
            where = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
            click.echo(f"Error: {exc.format_message()}{where}", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)
