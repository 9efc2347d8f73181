"""Admin REST API (Pulsar admin v2 shape), HTTP lookup and Prometheus metrics."""
from letterbox.admin.server import AdminServer

__all__ = ["AdminServer"]
