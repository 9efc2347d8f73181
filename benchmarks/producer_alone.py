"""What the official client's producer alone can do against letterbox (issue 13, W1 unbatched):
peers.py's own producer (_peers_pulsar.py produce: send_async with a checked callback,
max_pending_messages=1000, batching off) against a fresh broker, with no consumer running
(the subscription is made first, so the messages are kept), then the consumer alone on that
backlog. Prints msg/s, the process's CPU seconds and the broker's.

    .venv/bin/python benchmarks/producer_alone.py [--messages 100000] [--sync full|off]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from _broker import PYTHON, Broker, cpu_seconds

WORKER = str(Path(__file__).resolve().parent / "_peers_pulsar.py")


def _tagged(out: str, tag: str) -> dict[str, object]:
    line = next(x for x in out.splitlines() if x.startswith(tag + " "))
    return json.loads(line[len(tag) + 1:])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--sync", choices=["full", "normal", "off"], default="full")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="producer-alone-"))
    broker = Broker(tmp / "data", sync=a.sync, log=tmp / "broker.log").start()
    try:
        topic = f"persistent://public/default/alone-{uuid.uuid4().hex[:8]}"
        sub = subprocess.Popen([PYTHON, WORKER, "consume", broker.url, topic, "1", "--timeout", "2", "--drain", "0"],
                               stdout=subprocess.PIPE, text=True)
        assert sub.stdout is not None
        for line in sub.stdout:  # the subscription exists once the worker says READY
            if line.startswith("READY"):
                break
        sub.kill()
        sub.wait()
        b0 = cpu_seconds(broker.pid) or 0.0
        out = subprocess.run([PYTHON, WORKER, "produce", broker.url, topic, str(a.messages), "--batching", "off"],
                             capture_output=True, text=True, check=True).stdout
        b1 = cpu_seconds(broker.pid) or 0.0
        done = _tagged(out, "DONE")
        span = float(done["t_end"]) - float(done["t_start"])  # type: ignore[arg-type]
        print(json.dumps({"role": "producer alone", "msg_per_s": round(a.messages / span), "seconds": round(span, 3),
                          "producer_cpu_s": done["cpu_s"], "broker_cpu_s": round(b1 - b0, 2),
                          "errors": done["errors"], "sync": a.sync}))
        t0 = time.time()
        out = subprocess.run([PYTHON, WORKER, "consume", broker.url, topic, str(a.messages), "--drain", "0"],
                             capture_output=True, text=True, check=True).stdout
        result = _tagged(out, "RESULT")
        print(json.dumps({"role": "consumer alone (backlog)", "seconds_with_start": round(time.time() - t0, 3),
                          "consumer_cpu_s": result["cpu_s"], "acked": result["acked"],
                          "broker_cpu_s": round((cpu_seconds(broker.pid) or 0.0) - b1, 2)}))
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
