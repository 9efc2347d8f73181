"""The /metrics formatter: one line per sample in Prometheus text format, and
blocks reused between builds only while their labels and values are unchanged."""
from __future__ import annotations

from letterbox.admin.metrics import BLOCK, FAMILY_NAMES, Formatter, Snapshot, format_metrics


def _snapshot(n: int, backlog_of: dict[int, int] | None = None) -> Snapshot:
    snap = Snapshot("standalone")
    for i in range(n):
        snap.topics.append(f'persistent://public/default/t"{i}')
        snap.namespaces.append("public/default")
        for col in snap.topic_values:
            col.append(i)
        snap.sub_topic.append(i)
        snap.subs.append("s\n1")
        for index, col in enumerate(snap.sub_values):
            col.append((backlog_of or {}).get(i, 0) if index == 0 else 0.5)
    snap.dead_letters = [("expired", 3)]
    return snap


def test_lines_and_escaping() -> None:
    text = format_metrics(_snapshot(2)).decode()
    lines = text.splitlines()
    assert text.endswith("\n")
    for name in FAMILY_NAMES:
        assert f"# TYPE {name} " in text
    assert ('pulsar_in_messages_total{cluster="standalone",namespace="public/default",'
            'topic="persistent://public/default/t\\"1"} 1') in lines
    assert ('pulsar_subscription_back_log{cluster="standalone",namespace="public/default",'
            'topic="persistent://public/default/t\\"0",subscription="s\\n1"} 0') in lines
    assert 'letterbox_dead_letter_messages_total{cluster="standalone",reason="expired"} 3' in lines
    assert sum(1 for line in lines if line.startswith("pulsar_subscription_delayed{")) == 2


def test_blocks_are_reused_only_while_unchanged() -> None:
    n = 3 * BLOCK + 7
    formatter = Formatter()
    first = formatter.format(_snapshot(n))
    assert formatter.format(_snapshot(n)) == first
    changed = formatter.format(_snapshot(n, {BLOCK + 5: 42}))
    assert changed == format_metrics(_snapshot(n, {BLOCK + 5: 42}))
    assert changed != first
    assert b'topic="persistent://public/default/t\\"1005",subscription="s\\n1"} 42\n' in changed
    fewer = formatter.format(_snapshot(BLOCK // 2))  # topics deleted: nothing of the old build stays
    assert fewer == format_metrics(_snapshot(BLOCK // 2))
