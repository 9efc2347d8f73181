# Who may call which admin route: one declarative rule per (method, path
# template), looked up by the security middleware for every request.
#
# The default follows the path and fails closed: a route with {tenant} in its
# path needs a super user or an admin role of that tenant, any other route a
# super user. RULES lists only the routes that Pulsar opens further:
#   OPEN        no credentials at all (/metrics, as Pulsar's default
#               authenticateMetricsEndpoint=false);
#   LOOKUP      produce or consume on the topic in the path (HTTP lookup,
#               partition metadata, topic stats: Pulsar's LOOKUP / GET_STATS);
#   CONSUME     consume on the topic in the path, with the {subscription} of
#               the path when there is one (peek, examine, subscription
#               create/delete/skip/reset/expire, the letterbox move, dead
#               letters listing); on a namespace path, consume granted on the
#               namespace (topic listings).
# Super users and the tenant's admins pass every rule of their scope. A route
# added without an entry here is therefore never open: it needs tenant admin
# or super user until someone writes a looser rule on purpose.
from __future__ import annotations

import enum
import re

from letterbox.admin.request_parsing import NAMESPACE_BASE, NS_BASE, TOPIC_BASE


class Access(enum.Enum):
    OPEN = "open"
    SUPER_USER = "super user"
    TENANT_ADMIN = "tenant admin"
    LOOKUP = "lookup"
    CONSUME = "consume"


_SUB = TOPIC_BASE + "/subscription/{subscription}"
_LOOKUP_PATH = "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}"

_RULES_BY_TEMPLATE: dict[tuple[str, str], Access] = {
    ("GET", "/metrics"): Access.OPEN,
    ("GET", "/metrics/"): Access.OPEN,
    ("GET", _LOOKUP_PATH): Access.LOOKUP,
    ("GET", TOPIC_BASE + "/partitions"): Access.LOOKUP,
    ("GET", TOPIC_BASE + "/stats"): Access.LOOKUP,
    ("GET", TOPIC_BASE + "/partitioned-stats"): Access.LOOKUP,
    ("GET", TOPIC_BASE + "/internalStats"): Access.LOOKUP,
    ("GET", NS_BASE): Access.CONSUME,
    ("GET", NS_BASE + "/partitioned"): Access.CONSUME,
    ("GET", NAMESPACE_BASE + "/topics"): Access.CONSUME,
    ("GET", NAMESPACE_BASE + "/letterbox/deadLetterTopics"): Access.CONSUME,
    ("GET", TOPIC_BASE + "/subscriptions"): Access.CONSUME,
    ("PUT", _SUB): Access.CONSUME,
    ("DELETE", _SUB): Access.CONSUME,
    ("POST", _SUB + "/skip/{n}"): Access.CONSUME,
    ("POST", _SUB + "/skip_all"): Access.CONSUME,
    ("POST", _SUB + "/resetcursor/{timestamp}"): Access.CONSUME,
    ("POST", _SUB + "/resetcursor"): Access.CONSUME,
    ("POST", _SUB + "/expireMessages/{seconds}"): Access.CONSUME,
    ("POST", _SUB + "/letterbox/move"): Access.CONSUME,
    ("GET", _SUB + "/position/{n}"): Access.CONSUME,
    ("GET", TOPIC_BASE + "/ledger/{ledgerId}/entry/{entryId}"): Access.CONSUME,
    ("GET", TOPIC_BASE + "/examinemessage"): Access.CONSUME,
    ("GET", TOPIC_BASE + "/letterbox/deadLetters"): Access.CONSUME,
}

_REGEX_PART = re.compile(r"\{(\w+):[^}]*\}")


def canonical(template: str) -> str:
    """A path template as aiohttp's resource.canonical writes it (no regex parts)."""
    return _REGEX_PART.sub(r"{\1}", template)


RULES: dict[tuple[str, str], Access] = {(m, canonical(p)): a for (m, p), a in _RULES_BY_TEMPLATE.items()}


def access_for(method: str, path_template: str) -> Access:
    """The rule of one route; HEAD is GET's."""
    method = "GET" if method == "HEAD" else method
    rule = RULES.get((method, path_template))
    if rule is not None:
        return rule
    return Access.TENANT_ADMIN if "{tenant}" in path_template else Access.SUPER_USER
