# What letterbox.testing raises, in one module that imports nothing, so that the
# pytest plugin, the broker and its clock share them without importing each other.
from __future__ import annotations


class AdminCallError(RuntimeError):
    """An admin API call answered with an error status; the message is the broker's reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{reason} (HTTP {status})")
        self.status = status


class ManualClockError(RuntimeError):
    """The broker does not run the manual clock."""


class BrokerStartError(RuntimeError):
    """The broker did not come up; the message carries its log."""
