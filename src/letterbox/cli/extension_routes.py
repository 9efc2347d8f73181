# The admin routes only a letterbox broker has (`.../letterbox/...`), and what a CLI user does on
# Apache Pulsar instead. When such a route answers 404 and the broker's letterbox clock route
# answers 404 too, the admin API is Apache Pulsar's (or a letterbox started
# --pulsar-compatible-only): the CLI then says in one line that the command needs letterbox and
# what to use on Pulsar, instead of a bare "HTTP 404".
# Invariant: a 404 of a letterbox broker that has the extension (an unknown topic, subscription
# or message) is never turned into this message: the probe of the clock route tells them apart.
from __future__ import annotations

import click

CLOCK_ROUTE = "/admin/v2/letterbox/clock"
EXTENSION_MARK = "/letterbox/"

# the route's first segment after /letterbox/ -> what to use on Apache Pulsar instead
ON_PULSAR: dict[str, str] = {
    "clock": "Pulsar's clock is the wall clock; there is nothing to read or move",
    "deadLetterTopics": "list the namespace's topics (`letterbox admin topics list`) and look for the -DLQ suffix",
    "deadLetters": "read the dead letter topic with a reader (`letterbox consume` or the client's Reader)",
    "redrive": "consume the dead letter topic and produce each message to its source topic "
               "(letterbox.client.RetryConsumer's produce-then-acknowledge fallback does the same)",
    "redriveTasks": "a redrive on Pulsar is a consumer of your own: its progress is that subscription's backlog",
    "purge": "skip or clear the dead letter topic's subscription backlog (`letterbox admin topics clear-backlog`)",
    "deadLetterPolicy": "set DeadLetterPolicy on each consumer (Pulsar honours it on Shared and Key_Shared)",
    "redeliveryBackoff": "set the clients' negative-ack RedeliveryBackoff on each consumer",
    "attempts": "Pulsar keeps no attempt log; the message's redelivery count is all there is",
    "poison-suspects": "Pulsar keeps no per-message failure record; watch each message's redelivery count",
    "move": "produce the message to the other topic and acknowledge it (not atomic on Pulsar)",
}


class NeedsLetterbox(click.ClickException):
    """A letterbox-only command sent to an admin API that has no letterbox extension."""


def extension_of(path: str) -> str | None:
    """The extension a path belongs to (`deadLetters`, `redrive`, ...), or None for a Pulsar route."""
    _, mark, rest = path.partition(EXTENSION_MARK)
    if not mark:
        return None
    return rest.split("/", 1)[0].split("?", 1)[0] or None


def needs_letterbox(base_url: str, extension: str) -> NeedsLetterbox:
    instead = ON_PULSAR.get(extension, "there is no Apache Pulsar equivalent")
    return NeedsLetterbox(
        f"this command needs a letterbox broker: the admin API at {base_url} has no letterbox "
        f"extension (Apache Pulsar, or letterbox --pulsar-compatible-only); on Pulsar: {instead}"
    )
