# Where every letterbox command and library looks for the broker when not told:
# the environment variables first, then the broker's default addresses on this
# machine (127.0.0.1, never `localhost`, which may resolve to ::1 where the
# broker does not listen).
from __future__ import annotations

SERVICE_URL_ENV = "LETTERBOX_SERVICE_URL"
ADMIN_URL_ENV = "LETTERBOX_ADMIN_URL"
DEFAULT_SERVICE_URL = "pulsar://127.0.0.1:6650"
DEFAULT_ADMIN_URL = "http://127.0.0.1:8080"
