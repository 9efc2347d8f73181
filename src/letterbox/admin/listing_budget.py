# What one admin listing answers at most, for every route that lists stored messages (the
# dead-letter listing; the single-message routes use `clip` too). A listing is a JSON array
# answered in pages:
#   * a page holds items while its body stays within RESPONSE_BYTES; the first item is
#     always taken whole, so a page is at most RESPONSE_BYTES or one item (a message of up to
#     max_message_size) when that item alone is larger;
#   * when items are left, the answer carries `Link: <…&after=ID>; rel="next"` (RFC 8288)
#     and `X-Letterbox-Next-After: ID`: the same request with `after=ID` answers the next
#     page (items strictly after ID, in the listing's order);
#   * a key, property key or property value longer than MAX_VALUE_CHARS characters is cut
#     there and ends in "…"; its item says `"truncated": true` and names what was cut in
#     `truncatedFields` ("key", or "property:NAME" with NAME as listed); the whole value is
#     one request away (routes_dead_letter_values.py).
# Each item is serialized once, when it is added (its size is then known exactly); the body
# is the items joined, never the whole listing dumped at once.
# Invariants: items are in the order they were added; a page never holds an item after one
# that did not fit; `more` is true only when an item was offered and not taken.
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

from letterbox.admin.http_errors import AdminError

RESPONSE_BYTES = 4 * 1024 * 1024
MAX_VALUE_CHARS = 1024
AFTER = "after"
NEXT_HEADER = "X-Letterbox-Next-After"


class Clipped:
    """Values of one item cut to MAX_VALUE_CHARS, remembering which were cut."""

    def __init__(self) -> None:
        self.fields: list[str] = []

    def text(self, value: str, field: str) -> str:
        if len(value) <= MAX_VALUE_CHARS:
            return value
        self.fields.append(field)
        return value[:MAX_VALUE_CHARS] + "…"

    def mark(self, item: dict[str, Any]) -> dict[str, Any]:
        """`item` with the truncation flag and the names of the values cut, if any were."""
        if self.fields:
            item["truncated"] = True
            item["truncatedFields"] = self.fields
        return item


def clip_properties(props: dict[str, str], clipped: Clipped) -> dict[str, str]:
    """Property keys and values as a listing shows them."""
    out: dict[str, str] = {}
    for key, value in props.items():
        shown = clipped.text(key, "property key:" + key[:MAX_VALUE_CHARS])
        out[shown] = clipped.text(value, "property:" + shown)
    return out


class ListingPage:
    """One page of a listing: at most `limit` items and RESPONSE_BYTES of JSON (or one item)."""

    def __init__(self, request: web.Request, limit: int, order: Callable[[str], tuple[int, ...]],
                 budget: int = RESPONSE_BYTES) -> None:
        self.request = request
        self.limit = limit
        self.budget = budget
        self.order = order  # an item id's place in the listing (its ids sort in this order)
        self.after: tuple[int, ...] | None = None
        raw = request.query.get(AFTER)
        if raw is not None:
            try:
                self.after = order(raw)
            except ValueError:
                raise AdminError(400, f"{AFTER}={raw[:80]!r} is not an id this listing gives: use the "
                                      f"{NEXT_HEADER} header (or the Link rel=\"next\") of the previous page") from None
        self.parts: list[bytes] = []
        self.size = 2  # "[" and "]"
        self.last_id: str | None = None
        self.more = False

    def skips(self, item_id: str) -> bool:
        """Whether the item is at or before `after` (listed on an earlier page)."""
        return self.after is not None and self.order(item_id) <= self.after

    def add(self, item_id: str, render: Callable[[], dict[str, Any]]) -> bool:
        """Take the item (rendered only if there is room for one more); False once the page
        is full, and then there are more items than this page holds."""
        if len(self.parts) >= self.limit:
            self.more = True
            return False
        part = json.dumps(render()).encode()
        if self.parts and self.size + len(part) + 1 > self.budget:
            self.more = True
            return False
        self.size += len(part) + (1 if self.parts else 0)
        self.parts.append(part)
        self.last_id = item_id
        return True

    def response(self) -> web.Response:
        body = b"[" + b",".join(self.parts) + b"]"
        resp = web.Response(body=body, content_type="application/json")
        if self.more and self.last_id is not None:
            nxt = self.request.rel_url.update_query({AFTER: self.last_id})
            resp.headers["Link"] = f'<{nxt}>; rel="next"'
            resp.headers[NEXT_HEADER] = self.last_id
        return resp
