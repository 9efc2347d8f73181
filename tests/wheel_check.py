"""`make dist-check`: the wheel in dist/, installed into a fresh virtualenv with no extras
(this script runs with that virtualenv's python), does what a new user does first:
`letterbox standalone` starts (a child process on free ports), the README's example
sends, receives and acknowledges a message, the console answers at / on the admin port.
Prints the virtualenv's installed size. Exits non-zero on the first thing that fails."""
from __future__ import annotations

import subprocess
import sys
import urllib.request
from pathlib import Path

import pulsar

from letterbox.testing import Broker


def size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink()) / 1e6


def main() -> None:
    import letterbox

    assert "site-packages" in letterbox.__file__, f"not the installed package: {letterbox.__file__}"
    version = subprocess.run([Path(sys.executable).parent / "letterbox", "--version"],
                             capture_output=True, text=True, check=True).stdout.strip()
    with Broker() as broker:  # `python -m letterbox standalone --port 0 --admin-port 0`
        client = pulsar.Client(broker.url)
        producer = client.create_producer("wheel-check")
        consumer = client.subscribe("wheel-check", "wheel-check-sub",
                                    initial_position=pulsar.InitialPosition.Earliest)
        producer.send(b"order #1")
        msg = consumer.receive(10_000)
        consumer.acknowledge(msg)
        assert msg.data() == b"order #1"
        client.close()
        with urllib.request.urlopen(broker.admin_url + "/", timeout=10) as resp:
            page = resp.read().decode()
        assert resp.status == 200 and "<html" in page.lower(), page[:200]
    print(f"{version}: standalone, README example and console OK")
    print(f"installed size of {sys.prefix}: {size_mb(Path(sys.prefix)):.0f} MB")
    from letterbox.protocol import speedups

    compiled = speedups.send_codec is not None and speedups.consumer_codec is not None
    print("codecs: " + ("compiled" if compiled else "pure-Python references"))


if __name__ == "__main__":
    main()
