"""Top lines of a py-spy raw profile (`py-spy record --format raw`, or e2e.py --profile):
self and total time per function, in % of all samples of all threads.

    .venv/bin/python benchmarks/profile_top.py broker.raw [--top 25] [--lines]

--only TEXT keeps the stacks through a function whose name holds TEXT.
--lines keeps the sampled line in the function's name (where inside it the time goes).
"""
from __future__ import annotations

import argparse
import re
from collections import Counter

_LINE = re.compile(r":\d+\)$")
# the frames every sample of a thread passes through, left out of the "total" list
_ROOTS = ("click/", "<frozen", "asyncio/runners.py", "letterbox/__main__.py", "cli/__init__.py", "threading.py")


def frames(stack: str, lines: bool) -> list[str]:
    out = []
    for f in stack.split(";"):
        if f.startswith(("process ", "thread ")):
            continue
        f = f.replace("/work/main/.venv/lib/python3.11/site-packages/", "")
        f = re.sub(r"\(/\S*/src/letterbox/", "(", f)
        out.append(f if lines else _LINE.sub(")", f))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("raw")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--lines", action="store_true")
    ap.add_argument("--only", metavar="TEXT", help="only stacks with a frame containing TEXT (%% still of all)")
    a = ap.parse_args()
    self_t: Counter[str] = Counter()
    total_t: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    n = 0
    with open(a.raw) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack:
                continue
            c = int(count)
            n += c
            fs = frames(stack, a.lines)
            if a.only and not any(a.only in f for f in fs):
                continue
            thread = next((p for p in stack.split(";") if p.startswith("thread ")), "?")
            threads[thread] += c
            if fs:
                self_t[fs[-1]] += c
            for name in set(fs):
                total_t[name] += c
    print(f"{n} samples; threads: " + ", ".join(f"{t} {100 * c / n:.1f}%" for t, c in threads.most_common()))
    print("\nself %   function")
    for name, c in self_t.most_common(a.top):
        print(f"{100 * c / n:6.1f}   {name}")
    print("\ntotal %  function")
    for name, c in [t for t in total_t.most_common() if not any(r in t[0] for r in _ROOTS)][: a.top]:
        print(f"{100 * c / n:6.1f}   {name}")


if __name__ == "__main__":
    main()
