# Redrive tasks: every redrive that moves messages runs as a task with an id,
# its progress readable (moved, skipped, remaining, state, filters) and
# cancellable by id, like SQS's message move tasks.
#   * A BACKGROUND task (the admin API's `background: true`) is persistent: its
#     record (JSON in the store's metadata, key TASK_KEY + id) is written when it
#     starts, IN each chunk's storage transaction (moved count and resume entry
#     commit with the messages they count), and when it ends. A broker that
#     stops or is killed (-9) with the task running resumes it by itself at the
#     next start; the DLQ's handled marks keep every message moved once, so the
#     counts stay exact.
#   * A task run inside its request (no `background`) is visible while it runs
#     and until the broker restarts, but is not resumed: the caller runs the
#     redrive again (nothing is moved twice).
# States: running -> finished | cancelled | failed. One redrive per DLQ at a time
# (redrive.claim). A broker stopping pauses its tasks (they stay `running` in
# the store) instead of cancelling them. At most KEEP_ENDED ended persistent
# tasks are kept; older ones are forgotten as new ones start.
from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from letterbox.broker.moves import redrive as rd
from letterbox.broker.moves.dead_letters import DeadLetterFilter
from letterbox.errors import LetterboxError
from letterbox.failure.edits import edit_of
from letterbox.topic_name import TopicName

if TYPE_CHECKING:
    from letterbox.broker.moves.move_ends import MovedTopic, MovesBroker
    from letterbox.storage.transaction import Transaction

log = logging.getLogger("letterbox")
TASK_KEY = "letterbox-redrive-task:"
TASK_ID = re.compile(r"^[0-9a-f]{16}$")
KEEP_ENDED = 100
RUNNING, FINISHED, CANCELLED, FAILED = "running", "finished", "cancelled", "failed"


def spec_of(req: rd.RedriveRequest) -> dict[str, Any]:
    """A request as JSON (what a task record keeps; may_write is rebuilt from the role)."""
    f = req.filter
    return {
        "reason": f.reason, "properties": dict(f.properties), "deadLetteredAfter": f.after_ms,
        "deadLetteredBefore": f.before_ms, "key": f.key, "group": f.group,
        "messageIds": sorted(f.message_ids) if f.message_ids is not None else None,
        "target": str(req.target) if req.target is not None else None,
        "subscriptionOnly": req.subscription_only, "maxMessages": req.max_messages,
        "ratePerSecond": req.rate_per_second,
        "edit": req.edit.to_json() if req.edit is not None else None, "editedBy": req.editor,
    }


def request_of(spec: dict[str, Any]) -> rd.RedriveRequest:
    ids = spec.get("messageIds")
    return rd.RedriveRequest(
        filter=DeadLetterFilter(
            reason=spec.get("reason"), properties=dict(spec.get("properties") or {}),
            after_ms=spec.get("deadLetteredAfter"), before_ms=spec.get("deadLetteredBefore"),
            key=spec.get("key"), message_ids=frozenset(ids) if ids is not None else None,
            group=spec.get("group"),
        ),
        target=TopicName.parse(spec["target"]) if spec.get("target") else None,
        max_messages=spec.get("maxMessages"), rate_per_second=spec.get("ratePerSecond"),
        subscription_only=bool(spec.get("subscriptionOnly")),
        edit=edit_of(spec["edit"]) if spec.get("edit") else None, editor=spec.get("editedBy"),
    )


@dataclass
class RedriveTask:
    id: str
    dlq: str
    spec: dict[str, Any]
    role: str | None  # whose produce rights are checked per message; None: no check
    persistent: bool
    state: str = RUNNING
    moved: int = 0
    skipped: int = 0
    matched: int = 0  # movable when it (re)started, plus what it had moved before
    remaining: int | None = None  # exact once it ended
    resume: int = 0  # the DLQ entry its next chunk starts at
    created_ms: int = 0
    updated_ms: int = 0
    ended_ms: int | None = None
    error: str | None = None
    restarts: int = 0
    stop: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    failure: BaseException | None = field(default=None, repr=False)  # why it failed (not stored)

    _RECORDED = ("id", "dlq", "spec", "role", "state", "moved", "skipped", "matched", "remaining",
                 "resume", "created_ms", "updated_ms", "ended_ms", "error", "restarts")

    def record(self, **changes: Any) -> str:
        out = {k: getattr(self, k) for k in self._RECORDED}
        out.update(changes)
        return json.dumps(out, separators=(",", ":"))

    @classmethod
    def from_record(cls, raw: str) -> RedriveTask:
        data = json.loads(raw)
        return cls(persistent=True, **{k: data[k] for k in cls._RECORDED if k in data})

    def view(self) -> dict[str, Any]:
        """The admin API's answer for this task."""
        spec = self.spec
        if self.remaining is not None:
            remaining, estimated = self.remaining, False
        else:
            left = max(self.matched - self.moved, 0)
            if spec.get("maxMessages") is not None:
                left = min(left, max(spec["maxMessages"] - self.moved, 0))
            remaining, estimated = left, True
        filters = {k: spec[k] for k in ("reason", "properties", "deadLetteredAfter", "deadLetteredBefore",
                                        "key", "group", "messageIds") if spec.get(k)}
        return {
            "taskId": self.id, "dlq": self.dlq, "state": self.state, "moved": self.moved,
            "skipped": self.skipped, "remaining": remaining, "remainingEstimated": estimated,
            "filters": filters, "target": spec.get("target"), "subscriptionOnly": spec.get("subscriptionOnly"),
            "maxMessages": spec.get("maxMessages"), "ratePerSecond": spec.get("ratePerSecond"),
            "background": self.persistent, "createdAt": self.created_ms, "updatedAt": self.updated_ms,
            "endedAt": self.ended_ms, "error": self.error, "restarts": self.restarts,
            "edit": spec.get("edit"), "editedBy": spec.get("editedBy"),
        }


class _Progress:
    """rd.ChunkProgress of a task: its record commits with each chunk."""

    def __init__(self, task: RedriveTask, now: Callable[[], int]) -> None:
        self.task = task
        self.now = now

    def record(self, txn: Transaction, count: int, resume: int) -> None:
        t = self.task
        if t.persistent:
            txn.put_metadata(TASK_KEY + t.id, t.record(moved=t.moved + count, resume=resume,
                                                       updated_ms=self.now()))

    def committed(self, count: int, resume: int) -> None:
        self.task.moved += count
        self.task.resume = resume  # its last entry: a batch may hold more to move
        self.task.updated_ms = self.now()


class RedriveTasks:
    """The broker's redrive tasks (service.redrive_tasks)."""

    def __init__(self, service: MovesBroker) -> None:
        self.service = service
        self._live: dict[str, RedriveTask] = {}  # running tasks
        self._ended: OrderedDict[str, RedriveTask] = OrderedDict()  # recent in-request tasks
        self._runs: dict[str, asyncio.Future[None]] = {}
        self._pausing = False

    # ---- reading ----

    def get(self, task_id: str) -> RedriveTask | None:
        found = self._live.get(task_id) or self._ended.get(task_id)
        if found is not None:
            return found
        raw = self.service.store.get_metadata(TASK_KEY + task_id)
        return RedriveTask.from_record(raw) if raw is not None else None

    def of_dlq(self, dlq: TopicName) -> list[RedriveTask]:
        seen: dict[str, RedriveTask] = {}
        for _k, raw in self.service.store.metadata_items(TASK_KEY):
            t = RedriveTask.from_record(raw)
            seen[t.id] = t
        seen.update(self._ended)
        seen.update(self._live)
        return sorted((t for t in seen.values() if t.dlq == str(dlq)), key=lambda t: (t.created_ms, t.id))

    # ---- starting and running ----

    async def start(self, topic: MovedTopic, req: rd.RedriveRequest, role: str | None,
                    background: bool) -> RedriveTask:
        """Check and start a redrive of `topic` as a task: in the background (persistent,
        resumed after a restart) or inside this call (returns once it ended)."""
        stop = rd.claim(topic)
        try:
            found = await rd.check(topic, req)  # one scan: what matches, what can move
            task = RedriveTask(id=secrets.token_hex(8), dlq=str(topic.name), spec=spec_of(req), role=role,
                               persistent=background, matched=found.redrivable,
                               skipped=max(found.matching - found.redrivable, 0), stop=stop,
                               created_ms=self.service.clock.now_ms())
            task.updated_ms = task.created_ms
            if background:
                await self.service.store.put_metadata(TASK_KEY + task.id, task.record())
                await self._forget_old()
        except BaseException:
            rd.release(topic)
            raise
        run = self._launch(task, topic, req)
        if not background:
            try:
                await asyncio.shield(run)
            except asyncio.CancelledError:  # the caller went away: stop before the next chunk
                task.stop.set()
                raise
        return task

    def _launch(self, task: RedriveTask, topic: MovedTopic, req: rd.RedriveRequest) -> asyncio.Future[None]:
        self._live[task.id] = task
        run = asyncio.ensure_future(self._run(task, topic, req))
        self._runs[task.id] = run
        self.service.track(run)
        return run

    async def _run(self, task: RedriveTask, topic: MovedTopic, req: rd.RedriveRequest) -> None:
        state, error, remaining = FINISHED, None, None
        try:
            if task.matched < 0:  # resumed at start: counted here, not in the start-up's loop turn
                task.matched = task.moved + (await rd.remaining(topic, req)).redrivable
            if req.max_messages is not None:
                req = dataclasses.replace(req, max_messages=max(req.max_messages - task.moved, 0))
            if req.max_messages != 0 and task.matched > task.moved:  # else create nothing
                progress = _Progress(task, self.service.clock.now_ms)
                _moved, remaining = await rd.run(topic, req, task.stop, progress, task.resume)
            if task.stop.is_set():
                state = CANCELLED
        except Exception as exc:
            state, error, task.failure = FAILED, str(exc), exc
            log.warning("redrive task %s of %s failed after %d messages: %s", task.id, task.dlq, task.moved, exc)
        finally:
            rd.release(topic)
            self._live.pop(task.id, None)
            self._runs.pop(task.id, None)
        if self._pausing and state != FAILED:
            return  # the broker is stopping: stays `running` in the store, resumed at the next start
        try:
            left = await rd.remaining(topic, req)  # one scan: still movable, still matching
            remaining = left.redrivable if remaining is None else remaining
            task.skipped = max(left.matching - remaining, 0)
        except Exception as exc:  # the DLQ went away meanwhile: keep what is known
            log.warning("redrive task %s: final count failed: %s", task.id, exc)
            remaining = remaining or 0
        task.state, task.error, task.remaining = state, error, remaining
        task.ended_ms = task.updated_ms = self.service.clock.now_ms()
        if task.persistent:
            try:
                await self.service.store.put_metadata(TASK_KEY + task.id, task.record())
            except Exception as exc:  # the store is closing: the record says running, resumed later
                log.warning("redrive task %s: final state not stored: %s", task.id, exc)
        else:
            self._ended[task.id] = task
            while len(self._ended) > KEEP_ENDED:
                self._ended.popitem(last=False)

    async def _forget_old(self) -> None:
        ended = [RedriveTask.from_record(raw) for _k, raw in self.service.store.metadata_items(TASK_KEY)]
        ended = sorted((t for t in ended if t.state != RUNNING), key=lambda t: t.ended_ms or 0)
        for t in ended[:max(len(ended) - KEEP_ENDED, 0)]:
            await self.service.store.put_metadata(TASK_KEY + t.id, None)

    # ---- cancelling, pausing, resuming ----

    async def cancel(self, task_id: str) -> RedriveTask | None:
        """Stop a running task before its next chunk (what it moved stays moved); a
        persistent one is recorded cancelled at once, so a restart does not resume it.
        None when it is not running."""
        task = self._live.get(task_id)
        if task is None:
            return None
        task.state = CANCELLED
        task.stop.set()
        if task.persistent:
            await self.service.store.put_metadata(TASK_KEY + task.id, task.record())
        return task

    async def cancel_dlq(self, dlq: TopicName) -> RedriveTask | None:
        """cancel() the task running on `dlq`, if any."""
        for task in list(self._live.values()):
            if task.dlq == str(dlq):
                return await self.cancel(task.id)
        return None

    def running_on(self, dlq: TopicName) -> RedriveTask | None:
        """The task running on `dlq` now, if any."""
        return next((t for t in self._live.values() if t.dlq == str(dlq)), None)

    async def stop_for_deletion(self, dlq: TopicName) -> None:
        """The DLQ is being deleted (with force): cancel its running task, recorded cancelled,
        and wait until its chunk in flight has ended."""
        task = await self.cancel_dlq(dlq)
        run = self._runs.get(task.id) if task is not None else None
        if run is not None:
            await asyncio.wait([run], timeout=30)

    def resume_all(self) -> int:
        """At start: relaunch every persistent task the store still records as running."""
        count = 0
        for _k, raw in self.service.store.metadata_items(TASK_KEY):
            task = RedriveTask.from_record(raw)
            if task.state != RUNNING or task.id in self._live:
                continue
            try:
                topic = self.service.persistent_topic(TopicName.parse(task.dlq), create=False)
                task.stop = rd.claim(topic)
            except LetterboxError as exc:
                task.state, task.error = FAILED, f"cannot resume: {exc}"
                task.ended_ms = self.service.clock.now_ms()
                self.service.background(self.service.store.put_metadata(TASK_KEY + task.id, task.record()))
                continue
            task.restarts += 1
            task.matched = -1  # counted by _run, off the start-up path
            log.info("resuming redrive task %s of %s (%d moved so far)", task.id, task.dlq, task.moved)
            self._launch(task, topic, self._request(task))
            count += 1
        return count

    def _request(self, task: RedriveTask) -> rd.RedriveRequest:
        req = request_of(task.spec)
        authz, role = self.service.authorization, task.role
        if role is not None and authz.enabled and not authz.is_super_user(role):
            req = dataclasses.replace(req, may_write=lambda t: authz.can_produce(role, t))
        return req

    async def pause_all(self) -> None:
        """Broker stopping: stop every task after its chunk in flight; persistent ones stay
        `running` in the store and resume at the next start."""
        self._pausing = True
        for task in self._live.values():
            task.stop.set()
        runs = list(self._runs.values())
        if runs:
            await asyncio.wait(runs, timeout=30)
