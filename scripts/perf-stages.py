#!/usr/bin/env python3
"""Split ahpd's CPU samples by pipeline stage, from `perf script` output.

Usage (docs/benchmarks.md, "Evening of 2026-12-05"):

    perf record -a -g -o /tmp/perf.data -- sleep 14   # while ahpbench floods
    perf script -i /tmp/perf.data --comm ahpd > /tmp/ahpd.script
    python3 scripts/perf-stages.py /tmp/ahpd.script

Each sample goes to the first stage whose function appears in its call
stack (kernel frames included), in the order of STAGES; the rest is
"other". It prints each stage's share of ahpd's samples.
"""
import collections
import re
import sys

# (stage, test on the stack's joined frames), first match wins.
STAGES = [
    ("PTY read system calls", lambda s: "rawio." in s and "pty.(*Terminal).reader" in s),
    ("socket write system calls", lambda s: "rawio.Write" in s or "rawio.writeAll" in s),
    ("socket read system calls", lambda s: "rawio." in s and "session" in s),
    ("frame escaping (Fragmenter)", lambda s: "Fragmenter" in s),
    ("message escaping (Viewer.buildOutput)", lambda s: "buildOutput" in s or "appendWhole" in s),
    ("emulator", lambda s: "pty.(*emulator)" in s or "emulate" in s),
    ("filter", lambda s: "filter" in s),
    ("GC", lambda s: any(f in s for f in ("gcBgMarkWorker", "gcAssist", "bgsweep", "bgscavenge"))),
    ("malloc", lambda s: "mallocgc" in s),
    ("reader: items", lambda s: "appendOutput" in s or "slicebytetostring" in s),
    ("scheduler, poller", lambda s: any(f in s for f in ("runtime.schedule", "findRunnable", "netpoll", "park_m"))),
    ("session, other", lambda s: "session" in s),
    ("pty, other", lambda s: "pty." in s),
]


def main(path):
    counts = collections.Counter()
    total = 0
    with open(path) as f:
        text = f.read()
    for sample in text.split("\n\n"):
        lines = [l.strip() for l in sample.strip().split("\n")]
        if len(lines) < 2:
            continue
        stack = " ".join(re.sub(r"^[0-9a-f]+ ", "", l) for l in lines[1:])
        total += 1
        counts[next((name for name, test in STAGES if test(stack)), "other")] += 1
    if total == 0:
        sys.exit(f"{path}: no samples (perf script --comm ahpd?)")
    print(f"{total} samples of ahpd")
    for name, n in counts.most_common():
        print(f"{100 * n / total:5.1f} %  {name}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
