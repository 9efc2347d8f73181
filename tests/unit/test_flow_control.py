"""FlowControl without sockets: reading pauses when a connection's pending SENDs or bytes,
or all connections' bytes, pass their limits and resumes at half; closing gives every byte
back. (The first two tests moved here from test_connection_guard.py with the backpressure.)"""
from __future__ import annotations

from letterbox.broker.connection.flow_control import FlowControl, PublishBuffer
from letterbox.config import BrokerConfig

MB = 1024 * 1024


class FakeCnx:
    """What flow control sees of ServerCnx: reading follows flow.paused."""

    def __init__(self, shared: PublishBuffer, config: BrokerConfig) -> None:
        self.reading = True
        self.flow = FlowControl(self, shared, config)

    def update_reading(self) -> None:
        self.reading = not self.flow.paused


def flows(config: BrokerConfig, n: int) -> list[tuple[FlowControl, FakeCnx]]:
    shared = PublishBuffer(config)
    out = []
    for _ in range(n):
        cnx = FakeCnx(shared, config)
        out.append((cnx.flow, cnx))
    return out


def test_pending_requests_pause_and_resume_at_half() -> None:
    [(flow, transport)] = flows(BrokerConfig(max_pending_publish_requests_per_connection=4), 1)
    for _ in range(3):
        flow.publish_started(100)
    assert transport.reading
    flow.publish_started(100)
    assert not transport.reading
    flow.publish_done(100)
    assert not transport.reading  # 3 pending: above half
    flow.publish_done(100)
    assert transport.reading  # 2 pending: half
    assert (flow.pauses, flow.resumes, flow.shared.pauses_total) == (1, 1, 1)
    flow.close()
    assert flow.shared.total == 0


def test_over_the_shared_limit_only_a_connection_over_its_share_pauses() -> None:
    """8 MB shared by two connections holding bytes: 4 MB each. The one holding more than
    that pauses when it adds a SEND; the other, under its share, is read on."""
    cfg = BrokerConfig(max_message_publish_buffer_size_in_mb=8, max_pending_bytes_per_connection=64 * MB)
    (a, ta), (b, tb) = flows(cfg, 2)
    a.set_buffered(1)  # a is in the middle of its next frame
    a.publish_started(5 * MB)
    b.publish_started(3 * MB)  # 8 MB + 1 byte > 8 MB; b holds 3 MB: under its share
    assert tb.reading
    assert ta.reading  # a is over its share but reads on until its frame is complete ...
    a.set_buffered(0)
    a.publish_started(1)  # ... and pauses when that SEND is added
    assert not ta.reading and tb.reading
    assert a.shared.global_pauses_total == 1
    b.publish_started(2 * MB)  # b now holds 5 MB, over its 4 MB share: paused too
    assert not tb.reading
    b.publish_done(3 * MB)  # b holds 2 MB, half its share: read again
    assert tb.reading and not ta.reading
    a.publish_done(3 * MB)  # a holds 2 MB + 1 byte: above half its share
    assert not ta.reading
    a.publish_done(1)
    assert ta.reading
    a.close()
    b.close()
    assert a.shared.total == 0 and not a.shared.holders


def test_a_connection_sending_little_is_never_paused_by_others_flooding() -> None:
    """Many connections each holding a large unfinished frame (slow senders) put the total
    far over the limit: each is paused but the one with the largest frame, which reads on,
    and a connection sending small SENDs is not."""
    cfg = BrokerConfig(max_message_publish_buffer_size_in_mb=4, max_pending_bytes_per_connection=64 * MB)
    pairs = flows(cfg, 11)
    (healthy, th), slow = pairs[0], pairs[1:]
    for i, (flow, _) in enumerate(slow):
        flow.set_buffered(MB + i)
    for i, (flow, _) in reversed(list(enumerate(slow))):  # the largest reads first this time
        flow.set_buffered(2 * MB + i)  # ~20 MB of unfinished frames: five times the limit
    assert [t.reading for _, t in slow] == [False] * 9 + [True]
    for _ in range(100):
        healthy.publish_started(100)
        assert th.reading
        healthy.publish_done(100)
    assert healthy.pauses == 0
    for flow, _ in slow:  # the frame timeout closes them: everything given back
        flow.close()
    assert healthy.shared.total == 0 and healthy.shared.framing == 0 and not healthy.shared.paused


def test_unfinished_frames_alone_over_the_limit_pause_all_but_the_largest() -> None:
    """Unfinished frames alone over the limit (many slow senders): a connection over its share
    pauses unless its frame is the largest, which reads on, so that some frame always
    completes; when it does, the largest paused frame is woken and reads on in turn."""
    cfg = BrokerConfig(max_message_publish_buffer_size_in_mb=1, max_pending_bytes_per_connection=64 * MB)
    (a, ta), (b, tb) = flows(cfg, 2)
    a.set_buffered(MB // 2 + 2)
    b.set_buffered(MB // 2 + 1)  # 1 MB + 3 bytes of unfinished frames
    assert not tb.reading and ta.reading  # b is over its share (512 KiB), a's frame is larger
    a.set_buffered(MB // 2 + 3)  # a reads on
    assert ta.reading
    a.publish_started(MB // 2 + 3)  # a's frame completed: its SEND is on its way to storage ...
    a.set_buffered(0)
    assert tb.reading  # ... and b, the largest unfinished frame now, reads on
    b.set_buffered(MB // 2 + 100)
    assert tb.reading
    b.close()  # (the frame timeout closed b)
    a.publish_done(MB // 2 + 3)
    assert a.shared.total == 0 and a.shared.framing == 0 and not a.shared.paused


def test_pending_bytes_pause_one_connection_only() -> None:
    cfg = BrokerConfig(max_message_size=MB, max_pending_bytes_per_connection=4 * MB,
                       max_message_publish_buffer_size_in_mb=-1)
    (a, ta), (b, tb) = flows(cfg, 2)
    for _ in range(4):
        a.publish_started(MB)
    assert ta.reading  # 4 MB: at the limit, not over
    a.set_buffered(1)
    assert not ta.reading and tb.reading
    b.publish_started(MB)
    assert tb.reading
    a.publish_done(MB)
    a.publish_done(MB)
    assert not ta.reading  # 2 MB + 1 byte: above half
    a.set_buffered(0)
    assert ta.reading


def test_per_connection_byte_limit_never_below_two_maximum_frames() -> None:
    [(flow, _)] = flows(BrokerConfig(max_message_size=5 * MB, max_pending_bytes_per_connection=1), 1)
    assert flow.max_bytes >= 2 * 5 * MB


def test_close_gives_back_the_bytes_and_resumes_the_others() -> None:
    cfg = BrokerConfig(max_message_publish_buffer_size_in_mb=8, max_pending_bytes_per_connection=64 * MB)
    (a, ta), (b, tb), (c, tc) = flows(cfg, 3)
    a.publish_started(6 * MB)
    c.publish_started(100)
    b.publish_started(3 * MB)  # over 8 MB, and b holds more than its share (8 MB / 3)
    assert ta.reading and tc.reading and not tb.reading
    a.close()  # the connection went away with its SENDs unreceipted
    assert a.shared.total == 3 * MB + 100 and tb.reading  # back at half
    a.publish_done(6 * MB)  # a late receipt callback after close changes nothing
    assert a.shared.total == 3 * MB + 100 and a.shared.holders == {b, c}


def test_a_batch_of_sends_counts_as_its_number_of_requests() -> None:
    [(flow, transport)] = flows(BrokerConfig(max_pending_publish_requests_per_connection=10), 1)
    flow.publish_started(1000, requests=9)
    assert transport.reading
    flow.publish_started(100)
    assert not transport.reading
    flow.publish_done(1000, requests=9)
    assert transport.reading and flow.pending_requests == 1 and flow.shared.total == 100
