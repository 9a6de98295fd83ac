#!/usr/bin/env python3
"""Split ahpd's CPU samples in a paced fan-out between the one-viewer and
the N-viewer runs, by stage, and give each further viewer's share.

Usage (docs/benchmarks.md, "Where a further viewer's CPU goes"):

    perf record -a -g -F 2999 -o /tmp/pf.data -- \\
        ahpbench -ahpd bin/ahpd -runs 1 -fanout 4 -pace 20 -samples 0 -flood=false -memory=false
    perf script -i /tmp/pf.data -F comm,tid,time,ip,sym > /tmp/pf.script
    python3 scripts/perf-fanout.py /tmp/pf.script
        # lists ahpd's and ahpbench's samples per half second; pick the
        # paced runs' spans from it (one viewer, then N), then:
    python3 scripts/perf-fanout.py /tmp/pf.script --one 11.5-14.5,26-29 --many 15-18,29.5-32.5 --viewers 4

Times are seconds from the first sample, in half-second bins. Each sample
of ahpd goes to the first stage whose test matches its call stack
(kernel frames included). A further viewer's share of a stage is (the
N-viewer spans' samples − the one-viewer spans') / (N − 1); give spans
of equal length to both.
"""
import argparse
import collections
import re

STAGES = [
    ("socket write system calls", lambda s: "rawio.Write" in s or "rawio.writeAll" in s),
    ("socket read system calls", lambda s: "rawio." in s and "session" in s),
    ("PTY read system calls", lambda s: "rawio." in s and "pty.(*Terminal).reader" in s),
    ("frames: Sender.Next (escape, copies)", lambda s: "flow.(*Sender).Next" in s or "Fragmenter" in s),
    ("WebSocket library", lambda s: "coder/websocket" in s),
    ("cork", lambda s: "cork." in s),
    ("emulator", lambda s: "pty.(*emulator)" in s or "emulate" in s),
    ("GC", lambda s: any(f in s for f in ("gcBgMarkWorker", "gcAssist", "bgsweep", "bgscavenge"))),
    ("malloc", lambda s: "mallocgc" in s),
    ("channels, select", lambda s: any(f in s for f in ("selectgo", "chansend", "chanrecv"))),
    ("scheduler, poller", lambda s: any(f in s for f in ("runtime.schedule", "findRunnable", "netpoll", "park_m", "mcall"))),
    ("session, other", lambda s: "session" in s),
    ("pty, other", lambda s: "pty." in s),
    ("flow, other", lambda s: "flow." in s),
]

HEADER = re.compile(r"^\s*(\S.*?)\s+(\d+)\s+(\d+\.\d+):")


def samples(path):
    """Yields (comm, seconds, stack) for each sample of perf script output."""
    cur, stack = None, []
    with open(path) as f:
        for line in f:
            m = HEADER.match(line)
            if m:
                if cur:
                    yield cur[0], cur[1], stack
                cur, stack = (m.group(1), float(m.group(3))), []
            elif line.strip():
                parts = line.strip().split(None, 1)
                if len(parts) == 2:
                    stack.append(parts[1])
    if cur:
        yield cur[0], cur[1], stack


def spans(arg):
    out = []
    for part in arg.split(","):
        a, b = part.split("-")
        out.append((float(a), float(b)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("script")
    ap.add_argument("--one", help="the one-viewer spans, e.g. 11.5-14.5,26-29")
    ap.add_argument("--many", help="the N-viewer spans, as long in all")
    ap.add_argument("--viewers", type=int, default=4)
    a = ap.parse_args()
    t0 = None
    if not a.one:
        bins = collections.defaultdict(collections.Counter)
        for comm, t, _ in samples(a.script):
            t0 = t0 if t0 is not None else int(t * 2)
            bins[int(t * 2) - t0][comm] += 1
        print("seconds  ahpd  ahpbench")
        for b in sorted(bins):
            if bins[b]["ahpd"] > 20:
                print(f"{b / 2:7.1f} {bins[b]['ahpd']:5d} {bins[b]['ahpbench']:9d}")
        return
    sets = {"one": spans(a.one), "many": spans(a.many)}
    counts = {k: collections.Counter() for k in sets}
    for comm, t, stack in samples(a.script):
        t0 = t0 if t0 is not None else int(t * 2)
        if comm != "ahpd":
            continue
        rel = (int(t * 2) - t0) / 2
        for k, rs in sets.items():
            if any(lo <= rel <= hi for lo, hi in rs):
                joined = ";".join(stack)
                name = next((n for n, test in STAGES if test(joined)), "other")
                counts[k][name] += 1
                counts[k]["all"] += 1
    n = a.viewers - 1
    per = (counts["many"]["all"] - counts["one"]["all"]) / n
    print(f"| stage | 1 viewer | {a.viewers} viewers | each further viewer | its share |")
    print("|---|---:|---:|---:|---:|")
    for name in [s for s, _ in STAGES] + ["other", "all"]:
        one, many = counts["one"][name], counts["many"][name]
        d = (many - one) / n
        share = f"{100 * d / per:.0f} %" if per else "–"
        print(f"| {name} | {one} | {many} | {d:.0f} | {share} |")


if __name__ == "__main__":
    main()
