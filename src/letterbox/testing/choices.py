# The values a letterbox.testing broker's options take, shared by Broker and the
# pytest plugin (which reads them when pytest starts, before any broker is needed,
# so this module imports nothing).
from __future__ import annotations

SUPER_USER = "letterbox-test-admin"
AUTH_MODES = ("none", "token")
CLOCKS = ("real", "manual")
MODES = ("embedded", "process")
