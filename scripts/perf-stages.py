#!/usr/bin/env python3
"""Split ahpd's CPU samples by pipeline stage, from `perf script` output.

Usage (for a `make bench-process` flood; docs/benchmarks.md):

    perf record -a -g -o /tmp/perf.data -- sleep 14   # while ahpbench floods
    perf script -i /tmp/perf.data --comm ahpd > /tmp/ahpd.script
    python3 scripts/perf-stages.py /tmp/ahpd.script

prints each stage's share of ahpd's samples. For a fan-out, record all
processes and keep the times:

    perf record -a -g -F 2999 -o /tmp/pf.data -- \\
        ahpbench -ahpd bin/ahpd -runs 1 -fanout 4 -pace 20 -samples 0 -flood=false -memory=false
    perf script -i /tmp/pf.data -F comm,tid,time,ip,sym > /tmp/pf.script
    python3 scripts/perf-stages.py --bins /tmp/pf.script
        # ahpd's and ahpbench's samples per half second: the spans of the
        # paced runs, one viewer, then N; then:
    python3 scripts/perf-stages.py /tmp/pf.script --one 11.5-14.5,26-29 --many 15-18,29.5-32.5 --viewers 4

which splits ahpd's samples in those spans (seconds from the first
sample, in half-second bins) by stage, and gives each further viewer's
share: (the N-viewer spans' samples − the one-viewer spans') / (N − 1).
Give spans of equal length to both.

Each sample goes to the first stage whose function appears in its call
stack (kernel frames included), in the order of STAGES; the rest is
"other". Figures measured before 2026-12-06 (in the git history of
docs/benchmarks.md) used the stage list of their day (`git log -p
scripts/perf-stages.py`).
"""
import argparse
import collections
import re
import sys

# (stage, test on the stack's joined frames), first match wins.
STAGES = [
    ("PTY read system calls", lambda s: "rawio." in s and "pty.(*Terminal).reader" in s),
    ("socket write system calls", lambda s: "rawio.Write" in s or "rawio.writeAll" in s),
    ("socket read system calls", lambda s: "rawio." in s and "session" in s),
    ("frames: Sender.Next (messages, escapes, copies)", lambda s: "flow.(*Sender).Next" in s or "Fragmenter" in s
     or "buildOutput" in s or "appendWhole" in s),
    ("WebSocket library", lambda s: "coder/websocket" in s),
    ("cork", lambda s: "cork." in s),
    ("emulator", lambda s: "pty.(*emulator)" in s or "emulate" in s),
    ("filter", lambda s: "filter" in s),
    ("GC", lambda s: any(f in s for f in ("gcBgMarkWorker", "gcAssist", "bgsweep", "bgscavenge"))),
    ("malloc", lambda s: "mallocgc" in s),
    ("reader: items", lambda s: "appendOutput" in s or "slicebytetostring" in s),
    ("channels, select", lambda s: any(f in s for f in ("selectgo", "chansend", "chanrecv"))),
    ("scheduler, poller", lambda s: any(f in s for f in ("runtime.schedule", "findRunnable", "netpoll", "park_m", "mcall"))),
    ("session, other", lambda s: "session" in s),
    ("pty, other", lambda s: "pty." in s),
    ("flow, other", lambda s: "flow." in s),
]

# A sample's first line: comm, tid (or pid/tid), an optional [cpu], time.
HEADER = re.compile(r"^(\S.*?)\s+(?:\d+/)?\d+\s+(?:\[\d+\]\s+)?(\d+\.\d+):")


def samples(path):
    """Yields (comm, seconds, stack) for each sample of perf script output."""
    cur, stack = None, []
    with open(path) as f:
        for line in f:
            m = HEADER.match(line)
            if m:
                if cur:
                    yield cur[0], cur[1], stack
                cur, stack = (m.group(1).strip(), float(m.group(2))), []
            elif line.strip():
                parts = line.strip().split(None, 1)
                if len(parts) == 2:
                    stack.append(parts[1])
    if cur:
        yield cur[0], cur[1], stack


def stage(stack):
    joined = ";".join(stack)
    return next((name for name, test in STAGES if test(joined)), "other")


def spans(arg):
    return [tuple(float(x) for x in part.split("-")) for part in arg.split(",")]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("script")
    ap.add_argument("--bins", action="store_true", help="list ahpd's and ahpbench's samples per half second")
    ap.add_argument("--one", help="the one-viewer spans, e.g. 11.5-14.5,26-29")
    ap.add_argument("--many", help="the N-viewer spans, as long in all")
    ap.add_argument("--viewers", type=int, default=4)
    a = ap.parse_args()
    if bool(a.one) != bool(a.many):
        sys.exit("--one and --many go together")
    t0 = None
    bins = collections.defaultdict(collections.Counter)
    sets = {"one": spans(a.one), "many": spans(a.many)} if a.one else {}
    counts = {k: collections.Counter() for k in ("all", *sets)}
    for comm, t, stack in samples(a.script):
        t0 = t0 if t0 is not None else int(t * 2)
        rel = (int(t * 2) - t0) / 2
        if a.bins:
            bins[rel][comm] += 1
            continue
        if comm != "ahpd":
            continue
        name = stage(stack)
        for k, rs in sets.items():
            if any(lo <= rel <= hi for lo, hi in rs):
                counts[k][name] += 1
        counts["all"][name] += 1
    if a.bins:
        print("seconds  ahpd  ahpbench")
        for b in sorted(bins):
            if bins[b]["ahpd"] > 20:
                print(f"{b:7.1f} {bins[b]['ahpd']:5d} {bins[b]['ahpbench']:9d}")
        return
    if not sets:
        total = counts["all"].total()
        if total == 0:
            sys.exit(f"{a.script}: no samples of ahpd (perf script --comm ahpd?)")
        print(f"{total} samples of ahpd")
        for name, n in counts["all"].most_common():
            print(f"{100 * n / total:5.1f} %  {name}")
        return
    n = a.viewers - 1
    rows = [(name, counts["one"][name], counts["many"][name]) for name in [s for s, _ in STAGES] + ["other"]]
    rows.append(("all of ahpd", counts["one"].total(), counts["many"].total()))
    per = (rows[-1][2] - rows[-1][1]) / n
    print(f"| stage | 1 viewer | {a.viewers} viewers | each further viewer | its share |")
    print("|---|---:|---:|---:|---:|")
    for name, one, many in rows:
        d = (many - one) / n
        share = f"{100 * d / per:.0f} %" if per else "–"
        print(f"| {name} | {one} | {many} | {d:.0f} | {share} |")


if __name__ == "__main__":
    main()
