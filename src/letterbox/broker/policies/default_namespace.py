# The standalone's default tenant and namespace (public, public/default), stored once
# per data directory before the broker accepts connections, as Pulsar's standalone
# creates them. Topics are auto-created only inside namespaces that exist
# (topic_policies.auto_creation_allowed), so clients using short topic names work
# from the first connection on. A data directory that was seeded keeps whatever the
# operator did since (deleting public/default is respected).
from __future__ import annotations

import json
from typing import TYPE_CHECKING

from letterbox.broker.policies.namespace_policies import NAMESPACE_KEY
from letterbox.security.authorization import TENANT_KEY

if TYPE_CHECKING:
    from letterbox.broker.policies.bounded import PolicyBroker

SEEDED_KEY = "admin:defaults-seeded"


async def seed_defaults(service: PolicyBroker) -> None:
    store = service.store
    if store.get_metadata(SEEDED_KEY) is None:
        info = {"adminRoles": [], "allowedClusters": [service.config.cluster_name]}
        await store.put_metadata(TENANT_KEY + "public", json.dumps(info))
        await store.put_metadata(NAMESPACE_KEY + "public/default", json.dumps({}))
        await store.put_metadata(SEEDED_KEY, "1")


def namespace_exists(service: PolicyBroker, namespace: str) -> bool:
    return service.store.get_metadata(NAMESPACE_KEY + namespace) is not None
