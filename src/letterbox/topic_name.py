# Topic names: `domain://tenant/namespace/local`, with short forms
# `local` and `tenant/namespace/local` expanded to persistent://... in
# public/default. A TopicName is immutable and always fully qualified; the
# partition suffix `-partition-<i>` is recognised so a partition can find its
# partitioned parent. Each segment follows letterbox.names' rules.
# parse() remembers the names it read last (PARSED_CACHE of them): a redrive or a
# failure event parses the same REAL_TOPIC once per message, and the checks of
# letterbox.names cost more than the lookup. Only valid names are remembered.
from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from functools import lru_cache

from letterbox.errors import InvalidTopicName
from letterbox.names import NameKind, name_problem

PARTITION_SUFFIX = "-partition-"
_PART_RE = re.compile(r"^(.*)-partition-(\d+)$")
DOMAINS = ("persistent", "non-persistent")
PARSED_CACHE = 4096


@dataclass(frozen=True, slots=True)
class TopicName:
    domain: str
    tenant: str
    namespace: str
    local: str

    @classmethod
    def parse(cls, raw: str) -> TopicName:
        if not raw or not isinstance(raw, str):
            raise InvalidTopicName("topic name is empty")
        return _parse(raw)

    @classmethod
    def _parse_new(cls, raw: str) -> TopicName:
        if len(raw) > 1024:
            raise InvalidTopicName("topic name is longer than 1024 characters")
        if "://" in raw:
            domain, _, rest = raw.partition("://")
            if domain not in DOMAINS:
                raise InvalidTopicName(
                    f"invalid topic domain {domain!r} in {raw!r}: use persistent:// or non-persistent://"
                )
            parts = rest.split("/")
            if len(parts) != 3:
                raise InvalidTopicName(
                    f"invalid topic name {raw!r}: expected {domain}://tenant/namespace/topic"
                )
            tenant, namespace, local = parts
        else:
            parts = raw.split("/")
            if len(parts) == 1:
                domain, tenant, namespace, local = "persistent", "public", "default", parts[0]
            elif len(parts) == 3:
                domain, (tenant, namespace, local) = "persistent", parts
            else:
                raise InvalidTopicName(
                    f"invalid topic name {raw!r}: use 'topic', 'tenant/namespace/topic' "
                    "or 'persistent://tenant/namespace/topic'"
                )
        segments: tuple[tuple[NameKind, str], ...] = (("tenant", tenant), ("namespace", namespace))
        for what, value in segments:
            problem = name_problem(what, value)
            if problem is not None:
                raise InvalidTopicName(f"invalid {what} {value!r} in topic name {raw!r}: {problem}")
        problem = name_problem("topic", local)
        if problem is not None:
            raise InvalidTopicName(f"invalid local topic name {local!r} in {raw!r}: {problem}")
        return cls(domain, tenant, namespace, local)

    @property
    def persistent(self) -> bool:
        return self.domain == "persistent"

    @property
    def admin_path(self) -> str:
        """This topic's path in the admin v2 REST API, every segment escaped."""
        return "/admin/v2/" + "/".join(
            urllib.parse.quote(s, safe="") for s in (self.domain, self.tenant, self.namespace, self.local)
        )

    @property
    def namespace_name(self) -> str:
        return f"{self.tenant}/{self.namespace}"

    @property
    def partition_index(self) -> int:
        m = _PART_RE.match(self.local)
        return int(m.group(2)) if m else -1

    @property
    def partitioned_parent(self) -> TopicName:
        m = _PART_RE.match(self.local)
        if not m:
            return self
        return TopicName(self.domain, self.tenant, self.namespace, m.group(1))

    def partition(self, index: int) -> TopicName:
        return TopicName(self.domain, self.tenant, self.namespace, f"{self.local}{PARTITION_SUFFIX}{index}")

    def __str__(self) -> str:
        return f"{self.domain}://{self.tenant}/{self.namespace}/{self.local}"


@lru_cache(maxsize=PARSED_CACHE)
def _parse(raw: str) -> TopicName:
    return TopicName._parse_new(raw)  # an invalid name raises: nothing is remembered
