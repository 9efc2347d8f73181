"""SENDs arriving together in one write -- which the broker reads as one run through the
compiled codec (ServerProtocol.take_sends, handlers_producer.handle_sends) -- are each
answered as if they had come alone: good ones stored and receipted, a bad checksum, a lying
count, an unknown producer or a compressed message taking the full path with its own answer,
in the middle of the run, without disturbing the SENDs around them."""
from __future__ import annotations

import cramjam
import pulsar

from letterbox.errors import ServerError
from letterbox.protocol import client_commands, pb
from letterbox.protocol.compression import ZSTD
from tests.broker import test_robustness as robustness
from tests.broker.test_robustness import RawConn, topic_name
from tests.broker.test_untrusted_counts import batch, message, official, receive_all

T = pb.BaseCommand
raw = robustness.raw
survivor = robustness.survivor
others_unaffected = robustness.others_unaffected
__all__ = ["official", "others_unaffected", "raw", "survivor"]


def test_a_run_of_sends_in_one_write_is_answered_send_by_send(raw: RawConn, official: pulsar.Client) -> None:
    topic = topic_name("runs")
    consumer = official.subscribe(topic, "watcher")
    raw.handshake()
    raw.create_producer(topic, 1, 1)
    corrupt = bytearray(message(1, b"corrupted"))
    corrupt[-1] ^= 0xFF
    zipped = bytes(cramjam.zstd.compress(b"zipped"))
    frames = [
        client_commands.send(1, 0, 1, message(0, b"m0")),
        client_commands.send(1, 1, 1, bytes(corrupt)),
        client_commands.send(1, 2, 2, message(2, b"lying count")),
        client_commands.send(9, 3, 1, message(3, b"no such producer")),
        client_commands.send(1, 4, 3, batch(4, [b"b0", b"b1", b"b2"])),
        client_commands.send(1, 5, 1, message(5, zipped, compression=ZSTD, uncompressed_size=6)),
        client_commands.send(1, 6, 1, message(6, b"m6")),
    ]
    raw.send(b"".join(frames))
    answers: dict[tuple[int, int], str] = {}
    for _ in frames:
        frame = raw.read_frame()
        if frame.type == T.SEND_RECEIPT:
            r = frame.command.send_receipt
            answers[(r.producer_id, r.sequence_id)] = "receipt"
        else:
            assert frame.type == T.SEND_ERROR, frame
            e = frame.command.send_error
            answers[(e.producer_id, e.sequence_id)] = ServerError(e.error).name
    assert answers == {
        (1, 0): "receipt",
        (1, 1): "ChecksumError",
        (1, 2): "ChecksumError",  # refused by the message check (see handlers_producer._refuse)
        (9, 3): "NotAllowedError",
        (1, 4): "receipt",
        (1, 5): "receipt",
        (1, 6): "receipt",
    }
    receive_all(consumer, [b"m0", b"b0", b"b1", b"b2", b"zipped", b"m6"])


def interleaved(raw: RawConn, official: pulsar.Client, name: str, count: int,
                bad: tuple[int, int] | None = None) -> None:
    """Producers 1 and 2 of one topic on one connection send `count` messages each, their
    SENDs alternating in one write, `bad` (if any) with a broken checksum. Each producer's
    answers come in its send order, `bad` refused with ChecksumError; the stored messages
    have consecutive entry ids in arrival order, and the consumer gets each of them in that
    order (none skipped, none held back)."""
    topic = topic_name(name)
    consumer = official.subscribe(topic, "watcher")
    raw.handshake()
    raw.create_producer(topic, 1, 1)
    raw.create_producer(topic, 2, 2)
    order = [(pid, seq) for seq in range(count) for pid in (1, 2)]
    frames = []
    for pid, seq in order:
        body = bytearray(message(seq, f"{pid}-{seq}".encode()))
        if (pid, seq) == bad:
            body[-1] ^= 0xFF
        frames.append(client_commands.send(pid, seq, 1, bytes(body)))
    raw.send(b"".join(frames))
    entry_ids: dict[tuple[int, int], int] = {}
    answered: dict[int, list[int]] = {1: [], 2: []}
    for _ in order:
        frame = raw.read_frame()
        if frame.type == T.SEND_ERROR:
            e = frame.command.send_error
            assert (e.producer_id, e.sequence_id) == bad and e.error == ServerError.ChecksumError, e
            answered[e.producer_id].append(e.sequence_id)
            continue
        assert frame.type == T.SEND_RECEIPT, frame
        r = frame.command.send_receipt
        entry_ids[(r.producer_id, r.sequence_id)] = r.message_id.entryId
        answered[r.producer_id].append(r.sequence_id)
    assert answered == {1: list(range(count)), 2: list(range(count))}
    stored = [k for k in order if k != bad]
    first = entry_ids[stored[0]]
    assert [entry_ids[k] for k in stored] == list(range(first, first + len(stored)))
    receive_all(consumer, [f"{pid}-{seq}".encode() for pid, seq in stored])


def test_two_producers_of_one_topic_interleaved_in_one_write_lose_no_delivery(
        raw: RawConn, official: pulsar.Client) -> None:
    interleaved(raw, official, "interleaved", 300)


def test_a_refused_send_between_two_producers_sends_keeps_the_ids_consecutive(
        raw: RawConn, official: pulsar.Client) -> None:
    """A SEND refused for its checksum is answered in its producer's order, after the
    receipts of the SENDs before it."""
    interleaved(raw, official, "interleaved-refusal", 40, bad=(2, 17))
