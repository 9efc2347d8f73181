"""A consumer process for the fault-injection test: retries every message with
reconsume_later until the dead letter policy takes it, and kills itself
(os._exit) at random moments around the broker-side moves: before a move, and
after a move but before the client's own acknowledgement."""
from __future__ import annotations

import os
import random
import sys

import pulsar

from letterbox.client import DeadLetterPolicy, DelayLevels, RetryConsumer
from letterbox.client.broker_moves import BrokerMoves, Move

CRASH_PROBABILITY = 0.03


def main() -> None:
    service_url, admin_url, topic, seed = sys.argv[1:5]
    rng = random.Random(int(seed))
    real_move = BrokerMoves.move

    def crashing_move(self: BrokerMoves, move: Move) -> bool:
        if rng.random() < CRASH_PROBABILITY:
            os._exit(3)  # died before the move: the message must come back
        moved = real_move(self, move)
        if rng.random() < CRASH_PROBABILITY:
            os._exit(4)  # died after the move, before the client's ack: nothing may be moved twice
        return moved

    BrokerMoves.move = crashing_move  # type: ignore[method-assign]
    client = pulsar.Client(service_url, operation_timeout_seconds=10,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    consumer = RetryConsumer(client, topic, "work", admin_url=admin_url,
                             delay_levels=DelayLevels("20ms 40ms"),
                             dead_letter_policy=DeadLetterPolicy(max_redeliver_count=2),
                             receiver_queue_size=50, initial_position=pulsar.InitialPosition.Earliest)
    while True:
        try:
            msg = consumer.receive(3000)
        except pulsar.Timeout:
            break
        consumer.reconsume_later(msg)
    consumer.close()
    client.close()


if __name__ == "__main__":
    main()
