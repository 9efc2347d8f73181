# What every admin route shares, apart from the server's lifecycle: the broker
# service, the stats tracker and /metrics cache, the bound ports, and the
# lookups of tenants, namespaces, registered clusters and existing topics.
# Route modules take an AdminContext (server.py's AdminServer is one), so the
# routes never import the server that registers them. Tenants, namespaces and
# registered clusters are kept in the store's metadata map under the
# "tenant:", "namespace:" and "cluster/" key prefixes.
from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from letterbox.admin.http_errors import AdminError
from letterbox.admin.metrics import MetricsCache
from letterbox.admin.stats import StatsTracker
from letterbox.broker import NAMESPACE_KEY, Topic
from letterbox.security.authorization import TENANT_KEY
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from letterbox.broker import BrokerService

CLUSTER_KEY = "cluster/"


class AdminContext:
    def __init__(self, service: BrokerService) -> None:
        self.service = service
        self.port = 0  # bound http:// port (0: off)
        self.tls_port = 0  # bound https:// port (0: off)
        self.tracker = StatsTracker(service)
        self.metrics = MetricsCache(service, self.tracker)

    # --- shared lookups ----------------------------------------------------------
    def tenants(self) -> list[str]:
        return [k[len(TENANT_KEY):] for k, _ in self.service.store.metadata_items(TENANT_KEY)]

    def namespaces(self, tenant: str) -> list[str]:
        prefix = f"{NAMESPACE_KEY}{tenant}/"
        return [k[len(NAMESPACE_KEY):] for k, _ in self.service.store.metadata_items(prefix)]

    def registered_clusters(self) -> dict[str, str]:
        """Clusters registered by PUT (not this broker's own): name -> ClusterData JSON."""
        return {k[len(CLUSTER_KEY):]: v for k, v in self.service.store.metadata_items(CLUSTER_KEY)}

    def require_tenant(self, tenant: str) -> None:
        if self.service.store.get_metadata(TENANT_KEY + tenant) is None:
            raise AdminError(404, f"Tenant {tenant} does not exist")

    def namespace_exists(self, ns: str) -> bool:
        return self.service.store.get_metadata(NAMESPACE_KEY + ns) is not None

    def require_namespace(self, ns: str) -> None:
        if not self.namespace_exists(ns):
            raise AdminError(404, f"Namespace {ns} does not exist")

    def namespace_topics(self, ns: str) -> list[str]:
        """The topics of a namespace; 404 when it has none and does not exist."""
        topics = self.service.list_topics(ns)
        if not topics and not self.namespace_exists(ns):
            raise AdminError(404, f"Namespace {ns} does not exist")
        return topics

    def host(self, request: web.Request) -> str:
        cfg = self.service.config
        host = cfg.advertised_address
        if not host:
            sock = request.transport.get_extra_info("sockname") if request.transport else None
            host = sock[0] if sock else "127.0.0.1"
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return host

    def existing_topic(self, name: TopicName) -> Topic:
        """A loaded or stored non-partitioned topic (or partition); 404 otherwise."""
        if self.service.partitions_of(name) > 0:
            raise AdminError(
                404, f"Topic {name} is a partitioned topic; use partitioned-stats or its partitions"
            )
        topic = self.service.topics.get(str(name))
        if topic is not None:
            return topic
        if not self.service.topic_exists(name):
            raise AdminError(404, f"Topic {name} not found")
        return self.service.get_topic(name, create=False)
