# letterbox.testing: a real letterbox broker for tests and scripts, in a child
# process or embedded in this one, with its manual clock (docs/testing.md). The
# pytest plugin (letterbox.testing.pytest_plugin, registered as `letterbox`)
# builds its fixtures on the same Broker.
# The names below are loaded on first use: pytest imports this package for the
# plugin in every run of a project that has it installed, tests that use no
# broker included, so importing it costs nothing a broker alone needs.
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from letterbox.testing.broker import Broker
    from letterbox.testing.clock import BrokerClock
    from letterbox.testing.errors import AdminCallError, BrokerStartError, ManualClockError

__all__ = ["AdminCallError", "Broker", "BrokerClock", "BrokerStartError", "ManualClockError"]
_WHERE = {"AdminCallError": "errors", "Broker": "broker", "BrokerClock": "clock",
          "BrokerStartError": "errors", "ManualClockError": "errors"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'letterbox.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(f"letterbox.testing.{_WHERE[name]}"), name)
