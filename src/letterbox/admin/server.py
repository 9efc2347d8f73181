# The admin HTTP server (aiohttp.web), in the shape of Pulsar's admin REST API
# v2: same paths, methods, JSON field names and status codes (404 unknown,
# 409 already exists, 412/400 with {"reason": ...} for bad input, 405 wrong
# method), plus the HTTP lookup that lets the official clients use
# http://host:<admin port> as their service URL, and Prometheus /metrics.
# Tenants and namespaces are kept in the store's metadata map under the
# "tenant:" and "namespace:" key prefixes.
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from letterbox.admin.metrics import render_metrics
from letterbox.admin.stats import StatsTracker, empty_topic_stats, internal_stats
from letterbox.broker.topic import PersistentTopic, Topic
from letterbox.broker.topic_name import TopicName
from letterbox.errors import InvalidTopicName, LetterboxError, NotAllowed, TopicNotFound

if TYPE_CHECKING:
    from letterbox.broker.service import BrokerService

log = logging.getLogger("letterbox.admin")
TENANT_KEY = "tenant:"
NAMESPACE_KEY = "namespace:"
SEEDED_KEY = "admin:defaults-seeded"
MAX_PARTITIONS = 10_000
SAMPLE_SECONDS = 1.0
DOMAIN = "{domain:persistent|non-persistent}"
TOPIC_BASE = "/admin/v2/" + DOMAIN + "/{tenant}/{namespace}/{topic}"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class AdminError(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _error(status: int, reason: str) -> web.Response:
    return web.json_response({"reason": reason}, status=status)


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except AdminError as exc:
        return _error(exc.status, exc.reason)
    except InvalidTopicName as exc:
        return _error(412, str(exc))
    except TopicNotFound as exc:
        return _error(404, str(exc))
    except NotAllowed as exc:
        return _error(412, str(exc))
    except LetterboxError as exc:
        return _error(500, str(exc))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _error(exc.status, exc.reason)
    except Exception as exc:
        log.exception("admin request %s %s failed", request.method, request.path)
        return _error(500, f"{type(exc).__name__}: {exc}")


def _no_content() -> web.Response:
    return web.Response(status=204)


class AdminServer:
    def __init__(self, service: BrokerService) -> None:
        self.service = service
        self.port = 0
        self.tracker = StatsTracker(service)
        self._runner: web.AppRunner | None = None
        self._sampler: asyncio.Task[None] | None = None

    # --- lifecycle ---------------------------------------------------------------
    async def start(self, host: str, port: int) -> None:
        await self._seed_defaults()
        app = web.Application(middlewares=[_errors])
        self._routes(app)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else port
        self._sampler = asyncio.ensure_future(self._sample_loop())

    async def stop(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sampler
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _sample_loop(self) -> None:
        while True:
            try:
                self.tracker.sample()
            except Exception:
                log.exception("stats sampling failed")
            await asyncio.sleep(SAMPLE_SECONDS)

    async def _seed_defaults(self) -> None:
        store = self.service.store
        if store.get_metadata(SEEDED_KEY) is None:
            info = {"adminRoles": [], "allowedClusters": [self.service.config.cluster_name]}
            await store.put_metadata(TENANT_KEY + "public", json.dumps(info))
            await store.put_metadata(NAMESPACE_KEY + "public/default", json.dumps({}))
            await store.put_metadata(SEEDED_KEY, "1")

    def _routes(self, app: web.Application) -> None:
        r = app.router
        r.add_get("/admin/v2/clusters", self.list_clusters)
        r.add_get("/admin/v2/clusters/{cluster}", self.get_cluster)
        r.add_get("/admin/v2/tenants", self.list_tenants)
        r.add_get("/admin/v2/tenants/{tenant}", self.get_tenant)
        r.add_put("/admin/v2/tenants/{tenant}", self.create_tenant)
        r.add_post("/admin/v2/tenants/{tenant}", self.update_tenant)
        r.add_delete("/admin/v2/tenants/{tenant}", self.delete_tenant)
        r.add_get("/admin/v2/namespaces/{tenant}", self.list_namespaces)
        r.add_get("/admin/v2/namespaces/{tenant}/{namespace}", self.get_namespace)
        r.add_put("/admin/v2/namespaces/{tenant}/{namespace}", self.create_namespace)
        r.add_delete("/admin/v2/namespaces/{tenant}/{namespace}", self.delete_namespace)
        r.add_get("/admin/v2/namespaces/{tenant}/{namespace}/topics", self.namespace_topics)
        r.add_get("/admin/v2/brokers/health", self.health)
        r.add_get("/metrics", self.metrics)
        r.add_get("/metrics/", self.metrics)
        r.add_get("/lookup/v2/topic/" + DOMAIN + "/{tenant}/{namespace}/{topic}", self.lookup)
        ns_base = "/admin/v2/" + DOMAIN + "/{tenant}/{namespace}"
        r.add_get(ns_base, self.list_topics)
        r.add_get(ns_base + "/partitioned", self.list_partitioned)
        r.add_put(TOPIC_BASE, self.create_topic)
        r.add_delete(TOPIC_BASE, self.delete_topic)
        r.add_get(TOPIC_BASE + "/partitions", self.get_partitions)
        r.add_put(TOPIC_BASE + "/partitions", self.create_partitioned)
        r.add_post(TOPIC_BASE + "/partitions", self.update_partitioned)
        r.add_delete(TOPIC_BASE + "/partitions", self.delete_partitioned)
        r.add_get(TOPIC_BASE + "/stats", self.topic_stats)
        r.add_get(TOPIC_BASE + "/partitioned-stats", self.partitioned_stats)
        r.add_get(TOPIC_BASE + "/internalStats", self.internal_stats)
        r.add_get(TOPIC_BASE + "/subscriptions", self.list_subscriptions)

    # --- helpers -----------------------------------------------------------------
    def _tenants(self) -> list[str]:
        return [k[len(TENANT_KEY):] for k, _ in self.service.store.metadata_items(TENANT_KEY)]

    def _namespaces(self, tenant: str) -> list[str]:
        prefix = f"{NAMESPACE_KEY}{tenant}/"
        return [k[len(NAMESPACE_KEY):] for k, _ in self.service.store.metadata_items(prefix)]

    def _require_tenant(self, tenant: str) -> None:
        if self.service.store.get_metadata(TENANT_KEY + tenant) is None:
            raise AdminError(404, f"Tenant {tenant} does not exist")

    def _namespace_exists(self, ns: str) -> bool:
        return self.service.store.get_metadata(NAMESPACE_KEY + ns) is not None

    def _topic_name(self, request: web.Request) -> TopicName:
        m = request.match_info
        return TopicName.parse(f"{m['domain']}://{m['tenant']}/{m['namespace']}/{m['topic']}")

    def _host(self, request: web.Request) -> str:
        cfg = self.service.config
        host = cfg.advertised_address
        if not host:
            sock = request.transport.get_extra_info("sockname") if request.transport else None
            host = sock[0] if sock else "127.0.0.1"
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return host

    def _existing_topic(self, name: TopicName) -> Topic:
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

    async def _partition_count(self, request: web.Request) -> int:
        body = await request.text()
        if not body.strip():
            raise AdminError(400, "Request body must be the number of partitions (a JSON integer)")
        try:
            value = json.loads(body)
        except json.JSONDecodeError as exc:
            raise AdminError(400, f"Malformed JSON body: {exc}") from None
        if isinstance(value, bool) or not isinstance(value, int):
            raise AdminError(400, f"Number of partitions must be a JSON integer, got {body.strip()[:50]!r}")
        if value <= 0:
            raise AdminError(412, "Number of partitions should be more than 0")
        if value > MAX_PARTITIONS:
            raise AdminError(412, f"Number of partitions should be less than or equal to {MAX_PARTITIONS}")
        return value

    @staticmethod
    async def _json_body(request: web.Request) -> Any:
        body = await request.text()
        if not body.strip():
            return None
        try:
            return json.loads(body)
        except json.JSONDecodeError as exc:
            raise AdminError(400, f"Malformed JSON body: {exc}") from None

    # --- clusters ------------------------------------------------------------------
    async def list_clusters(self, request: web.Request) -> web.Response:
        return web.json_response([self.service.config.cluster_name])

    async def get_cluster(self, request: web.Request) -> web.Response:
        cluster = request.match_info["cluster"]
        if cluster != self.service.config.cluster_name:
            raise AdminError(404, f"Cluster {cluster} does not exist")
        host = self._host(request)
        return web.json_response({
            "serviceUrl": f"http://{host}:{self.port}",
            "brokerServiceUrl": f"pulsar://{host}:{self.service.port}",
        })

    # --- tenants -------------------------------------------------------------------
    async def list_tenants(self, request: web.Request) -> web.Response:
        return web.json_response(self._tenants())

    async def get_tenant(self, request: web.Request) -> web.Response:
        tenant = request.match_info["tenant"]
        value = self.service.store.get_metadata(TENANT_KEY + tenant)
        if value is None:
            raise AdminError(404, f"Tenant {tenant} does not exist")
        return web.json_response(json.loads(value))

    def _tenant_info(self, body: Any) -> dict[str, Any]:
        cluster = self.service.config.cluster_name
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise AdminError(400, "Tenant info must be a JSON object")
        roles = body.get("adminRoles", [])
        clusters = body.get("allowedClusters") or [cluster]
        if not isinstance(roles, list) or not isinstance(clusters, list):
            raise AdminError(400, "adminRoles and allowedClusters must be lists")
        unknown = [c for c in clusters if c != cluster]
        if unknown:
            raise AdminError(412, f"Clusters {unknown} do not exist")
        return {"adminRoles": roles, "allowedClusters": clusters}

    async def create_tenant(self, request: web.Request) -> web.Response:
        tenant = request.match_info["tenant"]
        info = self._tenant_info(await self._json_body(request))
        _check_segment("tenant", tenant)
        if self.service.store.get_metadata(TENANT_KEY + tenant) is not None:
            raise AdminError(409, f"Tenant {tenant} already exists")
        await self.service.store.put_metadata(TENANT_KEY + tenant, json.dumps(info))
        return _no_content()

    async def update_tenant(self, request: web.Request) -> web.Response:
        tenant = request.match_info["tenant"]
        info = self._tenant_info(await self._json_body(request))
        self._require_tenant(tenant)
        await self.service.store.put_metadata(TENANT_KEY + tenant, json.dumps(info))
        return _no_content()

    async def delete_tenant(self, request: web.Request) -> web.Response:
        tenant = request.match_info["tenant"]
        self._require_tenant(tenant)
        if self._namespaces(tenant):
            raise AdminError(409, f"The tenant {tenant} still has active namespaces")
        await self.service.store.put_metadata(TENANT_KEY + tenant, None)
        return _no_content()

    # --- namespaces ----------------------------------------------------------------
    async def list_namespaces(self, request: web.Request) -> web.Response:
        tenant = request.match_info["tenant"]
        self._require_tenant(tenant)
        return web.json_response(self._namespaces(tenant))

    async def get_namespace(self, request: web.Request) -> web.Response:
        ns = f"{request.match_info['tenant']}/{request.match_info['namespace']}"
        value = self.service.store.get_metadata(NAMESPACE_KEY + ns)
        if value is None:
            raise AdminError(404, f"Namespace {ns} does not exist")
        policies = {"bundles": {"numBundles": 1}, "deleted": False, **json.loads(value)}
        return web.json_response(policies)

    async def create_namespace(self, request: web.Request) -> web.Response:
        tenant, name = request.match_info["tenant"], request.match_info["namespace"]
        body = await self._json_body(request)
        if body is not None and not isinstance(body, dict):
            raise AdminError(400, "Namespace policies must be a JSON object")
        self._require_tenant(tenant)
        _check_segment("namespace", name)
        ns = f"{tenant}/{name}"
        if self._namespace_exists(ns):
            raise AdminError(409, f"Namespace {ns} already exists")
        await self.service.store.put_metadata(NAMESPACE_KEY + ns, json.dumps({}))
        return _no_content()

    async def delete_namespace(self, request: web.Request) -> web.Response:
        ns = f"{request.match_info['tenant']}/{request.match_info['namespace']}"
        if not self._namespace_exists(ns):
            raise AdminError(404, f"Namespace {ns} does not exist")
        if self.service.list_topics(ns):
            raise AdminError(409, f"Cannot delete non empty namespace {ns}")
        await self.service.store.put_metadata(NAMESPACE_KEY + ns, None)
        return _no_content()

    async def namespace_topics(self, request: web.Request) -> web.Response:
        ns = f"{request.match_info['tenant']}/{request.match_info['namespace']}"
        topics = self.service.list_topics(ns)
        if not topics and not self._namespace_exists(ns):
            raise AdminError(404, f"Namespace {ns} does not exist")
        mode = request.query.get("mode", "PERSISTENT").upper()
        if mode == "PERSISTENT":
            topics = [t for t in topics if t.startswith("persistent://")]
        elif mode == "NON_PERSISTENT":
            topics = [t for t in topics if t.startswith("non-persistent://")]
        return web.json_response(topics)

    # --- topics --------------------------------------------------------------------
    async def list_topics(self, request: web.Request) -> web.Response:
        m = request.match_info
        ns = f"{m['tenant']}/{m['namespace']}"
        topics = self.service.list_topics(ns)
        if not topics and not self._namespace_exists(ns):
            raise AdminError(404, f"Namespace {ns} does not exist")
        prefix = m["domain"] + "://"
        return web.json_response([t for t in topics if t.startswith(prefix)])

    async def list_partitioned(self, request: web.Request) -> web.Response:
        m = request.match_info
        ns = f"{m['tenant']}/{m['namespace']}"
        if not self._namespace_exists(ns) and not self.service.list_topics(ns):
            raise AdminError(404, f"Namespace {ns} does not exist")
        prefix = f"partitions:{m['domain']}://{ns}/"
        names = [k[len("partitions:"):] for k, _ in self.service.store.metadata_items(prefix)]
        return web.json_response(names)

    def _check_creatable(self, name: TopicName) -> None:
        if not self._namespace_exists(name.namespace_name):
            raise AdminError(404, f"Namespace {name.namespace_name} does not exist")
        if self.service.partitions_of(name) > 0:
            raise AdminError(409, f"Partitioned topic {name} already exists")
        if self.service.topic_exists(name):
            raise AdminError(409, f"This topic already exists: {name}")

    async def create_topic(self, request: web.Request) -> web.Response:
        name = self._topic_name(request)
        self._check_creatable(name)
        parent = name.partitioned_parent
        if parent != name and self.service.partitions_of(parent) > 0:
            raise AdminError(409, f"{name} is a partition of the partitioned topic {parent}")
        if name.persistent:
            self.service.store.open_ledger(str(name))
        else:
            self.service.get_topic(name)
        await self.service.store.barrier()
        return _no_content()

    async def delete_topic(self, request: web.Request) -> web.Response:
        name = self._topic_name(request)
        force = request.query.get("force", "false").lower() == "true"
        if self.service.partitions_of(name) > 0:
            raise AdminError(
                409, f"{name} is a partitioned topic; delete it with DELETE .../{name.local}/partitions"
            )
        if not self.service.topic_exists(name):
            raise AdminError(404, f"Topic {name} not found")
        try:
            await self.service.delete_topic(name, force=force)
        except NotAllowed as exc:
            raise AdminError(412, f"{exc}; retry with ?force=true to close them") from None
        return _no_content()

    async def get_partitions(self, request: web.Request) -> web.Response:
        name = self._topic_name(request)
        service = self.service
        check = request.query.get("checkAllowAutoCreation", "false").lower() == "true"
        if check and service.should_auto_partition(name):
            await service.create_partitioned_topic(name, service.config.default_num_partitions)
        return web.json_response({"partitions": service.partitions_of(name), "deleted": False})

    async def create_partitioned(self, request: web.Request) -> web.Response:
        name = self._topic_name(request)
        count = await self._partition_count(request)
        if name.partition_index >= 0:
            raise AdminError(412, f"{name} is a partition name; a partitioned topic cannot end in -partition-N")
        self._check_creatable(name)
        await self.service.create_partitioned_topic(name, count)
        self._open_partitions(name, 0, count)
        await self.service.store.barrier()
        return _no_content()

    def _open_partitions(self, name: TopicName, start: int, end: int) -> None:
        if name.persistent:
            for i in range(start, end):
                self.service.store.open_ledger(str(name.partition(i)))

    async def update_partitioned(self, request: web.Request) -> web.Response:
        name = self._topic_name(request)
        count = await self._partition_count(request)
        current = self.service.partitions_of(name)
        if current == 0:
            raise AdminError(404, f"Partitioned topic {name} does not exist")
        if count <= current:
            raise AdminError(
                412, f"Number of partitions can only be increased: {name} has {current}, asked for {count}"
            )
        await self.service.create_partitioned_topic(name, count)
        self._open_partitions(name, current, count)
        await self.service.store.barrier()
        return _no_content()

    async def delete_partitioned(self, request: web.Request) -> web.Response:
        name = self._topic_name(request)
        force = request.query.get("force", "false").lower() == "true"
        if self.service.partitions_of(name) == 0:
            raise AdminError(404, f"Partitioned topic {name} does not exist")
        try:
            await self.service.delete_partitioned_topic(name, force=force)
        except NotAllowed as exc:
            raise AdminError(412, f"{exc}; retry with ?force=true to close them") from None
        return _no_content()

    async def topic_stats(self, request: web.Request) -> web.Response:
        topic = self._existing_topic(self._topic_name(request))
        return web.json_response(self.tracker.topic_stats(topic))

    async def partitioned_stats(self, request: web.Request) -> web.Response:
        name = self._topic_name(request)
        n = self.service.partitions_of(name)
        if n == 0:
            raise AdminError(404, f"Partitioned topic {name} does not exist")
        per_partition = request.query.get("perPartition", "true").lower() != "false"
        parts: dict[str, dict[str, Any]] = {}
        for i in range(n):
            part = name.partition(i)
            if self.service.topic_exists(part):
                parts[str(part)] = self.tracker.topic_stats(self.service.get_topic(part, create=False))
            else:
                parts[str(part)] = empty_topic_stats()
        return web.json_response(self.tracker.partitioned_stats(parts, per_partition))

    async def internal_stats(self, request: web.Request) -> web.Response:
        topic = self._existing_topic(self._topic_name(request))
        if not isinstance(topic, PersistentTopic):
            raise AdminError(412, "internalStats is only available for persistent topics")
        return web.json_response(internal_stats(topic))

    async def list_subscriptions(self, request: web.Request) -> web.Response:
        topic = self._existing_topic(self._topic_name(request))
        return web.json_response(sorted(getattr(topic, "subscriptions", {})))

    # --- lookup, health, metrics -----------------------------------------------------
    async def lookup(self, request: web.Request) -> web.Response:
        self._topic_name(request)
        host = self._host(request)
        broker = f"pulsar://{host}:{self.service.port}"
        return web.json_response({
            "brokerUrl": broker,
            "brokerUrlTls": "",
            "httpUrl": f"http://{host}:{self.port}",
            "httpUrlTls": "",
            "nativeUrl": broker,
        })

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok", content_type="text/plain")

    async def metrics(self, request: web.Request) -> web.Response:
        body = render_metrics(self.service, self.tracker)
        return web.Response(text=body, content_type="text/plain", charset="utf-8",
                            headers={"X-Content-Type-Options": "nosniff"})


def _check_segment(what: str, value: str) -> None:
    try:
        TopicName.parse(f"{value}/x/y" if what == "tenant" else f"x/{value}/y")
    except InvalidTopicName:
        raise AdminError(412, f"Invalid {what} name {value!r}") from None
