# Failure groups of a dead letter topic (letterbox extension; broker/moves/dead_letter_groups.py
# does the work, failure/fingerprint.py defines a group):
#   GET /admin/v2/persistent/{t}/{ns}/{dlq}/letterbox/deadLetters/groups[?reason=R]
#       -> 200 {"topic", "messages", "groups": [{"fingerprint", "reason", "errorClass", "pattern",
#               "count", "firstDeadLetteredAt", "lastDeadLetteredAt", "example": {"messageId", "text"},
#               "histogram": [count per bucket]}], "histogram": {"start", "bucketMs", "buckets"}}
# Groups come largest first; every group's histogram has the same buckets (the top-level
# "histogram" says where they start and how wide they are), so a chart draws them together.
# The same authorization as the dead letters listing (consume on the DLQ). A group's
# fingerprint is the `group` filter of the listing, redrive, purge and `letterbox dlq`.
# Errors: 404 unknown topic, 405 non-persistent topic, 400 a reason that is not text.
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from letterbox.admin.http_errors import AdminError
from letterbox.admin.request_parsing import TOPIC_BASE, topic_name
from letterbox.admin.topic_lookup import persistent_topic
from letterbox.broker import DeadLetterFilter, failure_groups
from letterbox.failure.fingerprint import FINGERPRINT, FINGERPRINT_CHARS

if TYPE_CHECKING:
    from letterbox.admin.admin_context import AdminContext

GROUPS_PATH = TOPIC_BASE + "/letterbox/deadLetters/groups"


def register(admin: AdminContext, router: web.UrlDispatcher) -> None:
    async def groups(request: web.Request) -> web.Response:
        flt = DeadLetterFilter(reason=request.query.get("reason"))
        topic = persistent_topic(admin, topic_name(request), "Dead-letter operations")
        return web.json_response(await failure_groups(topic, flt))

    router.add_get(GROUPS_PATH, groups)


def group_field(value: Any, where: str = "group") -> str | None:
    """A `group` filter (a fingerprint as the groups listing gives it), None when absent;
    AdminError 400 naming the field when it is not one."""
    if value is None:
        return None
    if not isinstance(value, str) or not FINGERPRINT.fullmatch(value):
        raise AdminError(400, f"{where} must be a failure group's fingerprint ({FINGERPRINT_CHARS} hex "
                              f"characters, as GET .../letterbox/deadLetters/groups lists them), "
                              f"got {str(value)[:60]!r}")
    return value
