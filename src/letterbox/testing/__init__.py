# letterbox.testing: a real letterbox broker for tests and scripts, in a child
# process or embedded in this one, with its manual clock (docs/testing.md). The
# pytest plugin (letterbox.testing.pytest_plugin, registered as `letterbox`)
# builds its fixtures on the same Broker.
from __future__ import annotations

from letterbox.testing.broker import AdminCallError, Broker
from letterbox.testing.clock import BrokerClock, ManualClockError
from letterbox.testing.runners import BrokerStartError

__all__ = ["AdminCallError", "Broker", "BrokerClock", "BrokerStartError", "ManualClockError"]
