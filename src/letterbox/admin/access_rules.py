# Who may call which admin route: one declared rule per (method, path
# template) of the admin app, looked up by the security middleware for every
# request. Every route the app registers is listed here (the route-walk test,
# tests/security/test_admin_route_walk.py, fails for a route without an
# entry); a route missing anyway is refused to everyone but super users.
#   OPEN          no credentials at all (/metrics, as Pulsar's default
#                 authenticateMetricsEndpoint=false; the console's static
#                 files at / and /console/..., which hold no data);
#   SUPER_USER    clusters, broker health, tenant create/update/delete and the
#                 tenant listing (Pulsar's validateSuperUserAccess), the broker's
#                 clock (read and advance, for tests);
#   TENANT_ADMIN  a super user or an admin role of the {tenant} in the path
#                 (namespaces, policies, permissions, topic create/delete,
#                 redrive and purge, compaction trigger and status, schema
#                 upload/delete and schemaCompatibilityStrategy, unload,
#                 terminate, trim);
#   LOOKUP        produce or consume on the topic in the path (HTTP lookup,
#                 partition metadata, topic stats, internal stats, last message
#                 id, schema reads: Pulsar's LOOKUP / GET_STATS / GET_SCHEMA);
#   CONSUME       consume on the topic in the path, with the {subscription} of
#                 the path when there is one (peek, examine, subscription
#                 create/delete/skip/reset/expire, the letterbox move, the attempt
#                 log and nack announcements, dead letters listing and groups, poison suspects); on a namespace path,
#                 consume granted on the namespace (topic listings, the dead letter
#                 topics and what is failing).
# Super users and the tenant's admins pass every rule of their scope. Routes
# that write to a topic named in the body (move, redrive, a namespace's
# deadLetterTopic) check the caller's right on that topic themselves.
from __future__ import annotations

import enum
import re

from letterbox.admin.console.routes import CONSOLE_PATH
from letterbox.admin.request_parsing import NAMESPACE_BASE, NS_BASE, TOPIC_BASE


class Access(enum.Enum):
    OPEN = "open"
    SUPER_USER = "super user"
    TENANT_ADMIN = "tenant admin"
    LOOKUP = "lookup"
    CONSUME = "consume"


_SUB = TOPIC_BASE + "/subscription/{subscription}"
_LOOKUP_PATH = "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}"
_TENANT = "/admin/v2/tenants/{tenant}"
_CLUSTER = "/admin/v2/clusters/{cluster}"
_NS_PERMISSIONS = NAMESPACE_BASE + "/permissions"
_NS_POLICIES = ("/deduplication", "/retention", "/messageTTL", "/letterbox/deadLetterPolicy",
                "/letterbox/redeliveryBackoff", "/letterbox/failureEvents", "/compactionThreshold", "/schemaCompatibilityStrategy",
                # limits on topics (admin/routes_namespace_limits.py)
                "/maxProducersPerTopic", "/maxConsumersPerTopic", "/maxUnackedMessagesPerConsumer",
                "/maxUnackedMessagesPerSubscription", "/delayedDelivery", "/autoTopicCreation", "/dispatchRate",
                "/subscriptionDispatchRate", "/inactiveTopicPolicies")
_TOPIC_POLICIES = ("/maxProducers", "/maxConsumers", "/maxUnackedMessagesOnConsumer",
                   "/maxUnackedMessagesOnSubscription", "/delayedDelivery", "/dispatchRate",
                   "/subscriptionDispatchRate", "/inactiveTopicPolicies")  # topic-level policies
_SCHEMAS = "/admin/v2/schemas/{tenant}/{namespace}/{topic}"
S, A = Access.SUPER_USER, Access.TENANT_ADMIN

_RULES_BY_TEMPLATE: dict[tuple[str, str], Access] = {
    ("GET", "/metrics"): Access.OPEN,
    ("GET", "/metrics/"): Access.OPEN,
    ("GET", "/"): Access.OPEN,
    ("GET", CONSOLE_PATH): Access.OPEN,
    # super user
    ("GET", "/admin/v2/clusters"): S,
    ("GET", _CLUSTER): S, ("PUT", _CLUSTER): S, ("POST", _CLUSTER): S, ("DELETE", _CLUSTER): S,
    ("GET", "/admin/v2/brokers/health"): S,
    ("GET", "/admin/v2/brokers/version"): S, ("GET", "/admin/v2/brokers/{cluster}"): S,
    ("GET", "/admin/v2/tenants"): S,
    ("GET", "/admin/v2/letterbox/clock"): S,  # the broker's clock (tests): broker-wide
    ("POST", "/admin/v2/letterbox/clock/advance"): S,
    ("PUT", _TENANT): S, ("POST", _TENANT): S, ("DELETE", _TENANT): S,
    # tenant admin
    ("GET", _TENANT): A,
    ("GET", "/admin/v2/namespaces/{tenant}"): A,
    ("GET", NAMESPACE_BASE): A, ("PUT", NAMESPACE_BASE): A, ("DELETE", NAMESPACE_BASE): A,
    **{(m, NAMESPACE_BASE + p): A for p in _NS_POLICIES for m in ("GET", "POST", "DELETE")},
    ("GET", NAMESPACE_BASE + "/backlogQuotaMap"): A,
    ("POST", NAMESPACE_BASE + "/backlogQuota"): A, ("DELETE", NAMESPACE_BASE + "/backlogQuota"): A,
    ("GET", _NS_PERMISSIONS): A,
    ("GET", _NS_PERMISSIONS + "/subscription/{subscription}"): A,
    ("POST", _NS_PERMISSIONS + "/subscription/{subscription}"): A,
    ("DELETE", _NS_PERMISSIONS + "/{subscription}/{role}"): A,
    ("POST", _NS_PERMISSIONS + "/{role}"): A,
    ("DELETE", _NS_PERMISSIONS + "/{role}"): A,
    ("GET", TOPIC_BASE + "/permissions"): A,
    ("POST", TOPIC_BASE + "/permissions/{role}"): A,
    ("DELETE", TOPIC_BASE + "/permissions/{role}"): A,
    ("PUT", TOPIC_BASE): A, ("DELETE", TOPIC_BASE): A,
    ("PUT", TOPIC_BASE + "/partitions"): A,
    ("POST", TOPIC_BASE + "/partitions"): A,
    ("DELETE", TOPIC_BASE + "/partitions"): A,
    ("POST", TOPIC_BASE + "/all_subscription/expireMessages/{seconds}"): A,
    ("POST", TOPIC_BASE + "/letterbox/redrive"): A,
    ("DELETE", TOPIC_BASE + "/letterbox/redrive"): A,
    ("GET", TOPIC_BASE + "/letterbox/redriveTasks"): A,
    ("GET", TOPIC_BASE + "/letterbox/redrive/{taskId}"): A,
    ("DELETE", TOPIC_BASE + "/letterbox/redrive/{taskId}"): A,
    ("POST", TOPIC_BASE + "/letterbox/purge"): A,
    ("PUT", TOPIC_BASE + "/compaction"): A,  # Pulsar's COMPACT topic operation
    ("GET", TOPIC_BASE + "/compaction"): A,
    ("PUT", NAMESPACE_BASE + "/schemaCompatibilityStrategy"): A,  # pulsar-admin's method
    ("PUT", NAMESPACE_BASE + "/compactionThreshold"): A,
    ("POST", _SCHEMAS + "/schema"): A,  # schema upload and delete (Pulsar: tenant admin)
    ("DELETE", _SCHEMAS + "/schema"): A,
    **{(m, TOPIC_BASE + p): A for p in _TOPIC_POLICIES for m in ("GET", "POST", "DELETE")},
    ("GET", TOPIC_BASE + "/backlogQuotaMap"): A,
    ("POST", TOPIC_BASE + "/backlogQuota"): A, ("DELETE", TOPIC_BASE + "/backlogQuota"): A,
    ("PUT", TOPIC_BASE + "/unload"): A,  # Pulsar's UNLOAD / TERMINATE / TRIM topic operations
    ("POST", TOPIC_BASE + "/terminate"): A,
    ("POST", TOPIC_BASE + "/terminate/partitions"): A,
    ("POST", TOPIC_BASE + "/trim"): A,
    # lookup and consume
    ("GET", _LOOKUP_PATH): Access.LOOKUP,
    ("GET", TOPIC_BASE + "/partitions"): Access.LOOKUP,
    ("GET", TOPIC_BASE + "/stats"): Access.LOOKUP,
    ("GET", TOPIC_BASE + "/partitioned-stats"): Access.LOOKUP,
    ("GET", TOPIC_BASE + "/internalStats"): Access.LOOKUP,
    ("GET", _SCHEMAS + "/schema"): Access.LOOKUP,  # schema reads (Pulsar's GET_SCHEMA)
    ("GET", _SCHEMAS + "/schema/{version}"): Access.LOOKUP,
    ("GET", _SCHEMAS + "/schemas"): Access.LOOKUP,
    ("GET", TOPIC_BASE + "/partitioned-internalStats"): Access.LOOKUP,
    ("GET", TOPIC_BASE + "/lastMessageId"): Access.LOOKUP,  # Pulsar: GET_STATS
    ("GET", NS_BASE): Access.CONSUME,
    ("GET", NS_BASE + "/partitioned"): Access.CONSUME,
    ("GET", NAMESPACE_BASE + "/topics"): Access.CONSUME,
    ("GET", NAMESPACE_BASE + "/letterbox/deadLetterTopics"): Access.CONSUME,
    ("GET", NAMESPACE_BASE + "/letterbox/failing"): Access.CONSUME,  # the console's landing summary
    ("GET", TOPIC_BASE + "/subscriptions"): Access.CONSUME,
    ("PUT", _SUB): Access.CONSUME,
    ("DELETE", _SUB): Access.CONSUME,
    ("POST", _SUB + "/skip/{n}"): Access.CONSUME,
    ("POST", _SUB + "/skip_all"): Access.CONSUME,
    ("POST", _SUB + "/resetcursor/{timestamp}"): Access.CONSUME,
    ("POST", _SUB + "/resetcursor"): Access.CONSUME,
    ("POST", _SUB + "/expireMessages/{seconds}"): Access.CONSUME,
    ("POST", _SUB + "/letterbox/move"): Access.CONSUME,
    ("GET", _SUB + "/letterbox/attempts/{messageId}"): Access.CONSUME,
    ("POST", _SUB + "/letterbox/attempts/{messageId}"): Access.CONSUME,
    ("GET", _SUB + "/position/{n}"): Access.CONSUME,
    ("GET", TOPIC_BASE + "/ledger/{ledgerId}/entry/{entryId}"): Access.CONSUME,
    ("GET", TOPIC_BASE + "/examinemessage"): Access.CONSUME,
    ("GET", TOPIC_BASE + "/letterbox/deadLetters"): Access.CONSUME,
    ("GET", TOPIC_BASE + "/letterbox/deadLetters/{messageId}"): Access.CONSUME,
    ("GET", TOPIC_BASE + "/letterbox/deadLetters/{messageId}/key"): Access.CONSUME,
    ("GET", TOPIC_BASE + "/letterbox/deadLetters/{messageId}/property"): Access.CONSUME,
    ("GET", TOPIC_BASE + "/letterbox/deadLetters/{messageId}/payload"): Access.CONSUME,
    ("GET", TOPIC_BASE + "/letterbox/deadLetters/groups"): Access.CONSUME,
    ("GET", _SUB + "/letterbox/poison-suspects"): Access.CONSUME,
}

_REGEX_PART = re.compile(r"\{(\w+):[^}]*\}")


def canonical(template: str) -> str:
    """A path template as aiohttp's resource.canonical writes it (no regex parts)."""
    return _REGEX_PART.sub(r"{\1}", template)


RULES: dict[tuple[str, str], Access] = {(m, canonical(p)): a for (m, p), a in _RULES_BY_TEMPLATE.items()}


def is_declared(method: str, path_template: str) -> bool:
    return ("GET" if method == "HEAD" else method, path_template) in RULES


def access_for(method: str, path_template: str) -> Access:
    """The rule of one route (HEAD is GET's); a route nobody declared: super users only."""
    method = "GET" if method == "HEAD" else method
    return RULES.get((method, path_template), Access.SUPER_USER)
