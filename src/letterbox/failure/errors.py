# The failure package's one error: a policy value that cannot be used. It is
# a ValueError so user code catching ValueError keeps working; the broker
# turns it into NotAllowed, the admin API into HTTP 400, the CLI into a usage
# error.
from __future__ import annotations


class PolicyError(ValueError):
    """A failure-handling policy setting cannot be used."""
