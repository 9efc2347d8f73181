# A usage error of the command line said in one line: `Error: <what is wrong and
# how to fix it>` on stderr and exit status 2 (click's status for usage errors),
# without click's usage and help lines, so the fix is the one thing shown.
# Invariant: the message never carries a secret given on the command line (a
# token is named by where it came from, never echoed).
from __future__ import annotations

from typing import IO, Any

import click


class OneLineUsageError(click.UsageError):
    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"Error: {self.format_message()}", file=file, err=True)
