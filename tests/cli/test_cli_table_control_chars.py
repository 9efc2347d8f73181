"""CLI tables show client-supplied text (a nack's reason in `admin topics attempts`, keys and
properties of dead letters) with its control characters escaped: a reason holding a line
break or a terminal escape sequence cannot add a fake row to the operator's table or
drive their terminal."""
from __future__ import annotations

import click
from click.testing import CliRunner

from letterbox.cli.output import table


@click.command()
def show() -> None:
    table(["#", "ending", "reason"], [[1, "nack", "db down\n2  nack  forged row\x1b]0;title\x07\x1b[2J\rX\t|"],
                                       [2, "ack-timeout", None]])


def test_control_characters_in_cells_are_escaped() -> None:
    result = CliRunner().invoke(show, color=True)  # color=True: click keeps escape sequences as written
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len(lines) == 3, lines  # the header and the two rows, no forged one
    row = lines[1]
    assert "\x1b" not in result.output and "\r" not in result.output and "\x07" not in result.output
    assert "db down\\n2  nack  forged row\\x1b]0;title\\x07\\x1b[2J\\rX\\t|" in row
    assert lines[2].split() == ["2", "ack-timeout", "-"]
    assert "é ü 漢" in _cells("é ü 漢")  # printable text is left alone


def _cells(text: str) -> str:
    @click.command()
    def one() -> None:
        table(["reason"], [[text]])

    return CliRunner().invoke(one).output
