#!/usr/bin/env python3
"""Check the timeline COLLAR_TRACE wrote (trace.test).

Usage: check_trace.py [--ranks N] [--alg ALG] [--calls N] [--overlap]
                      [--wrapped] [--merged] FILE...

Each FILE is a rank's trace (or, with --merged, collar-trace-merge's
output): valid JSON, every event's start no later than its end, every step
inside its collective's span, the collectives of ALG recorded CALLS times
per rank; --overlap: in every chunked allreduce, the copy-in of chunk i+1
overlaps the MPI allreduce of chunk i for most i (the pipeline's promise);
--wrapped: the ring buffer wrapped (said in otherData), else it did not;
--ranks: processes (ranks) seen.
"""
import argparse
import collections
import json
import sys


def fail(msg):
    print("check_trace: FAIL: " + msg)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int)
    ap.add_argument("--alg")
    ap.add_argument("--calls", type=int)
    ap.add_argument("--overlap", action="store_true")
    ap.add_argument("--wrapped", action="store_true")
    ap.add_argument("--merged", action="store_true")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    ranks = set()
    named = set()
    overlapped = pairs = 0
    for path in a.files:
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            fail(f"{path}: no trace: {e}")
        meta = doc["otherData"]
        if not a.merged and bool(meta["wrapped"]) != a.wrapped:
            fail(f"{path}: wrapped is {meta['wrapped']}")
        if not a.merged and a.wrapped and not (meta["events"] == meta["capacity"]
                                               and meta["dropped"] > 0):
            fail(f"{path}: a wrapped ring keeps capacity events and says how "
                 f"many it dropped: {meta}")
        ops = collections.defaultdict(list)
        spans = {}
        for ev in doc["traceEvents"]:
            if ev["ph"] == "M":
                if ev["name"] == "process_name":
                    named.add(ev["pid"])
                continue
            if ev["ph"] != "X":
                fail(f"{path}: unexpected event phase {ev['ph']}")
            ranks.add(ev["pid"])
            if ev["dur"] < 0:
                fail(f"{path}: event ends before it starts: {ev}")
            key = (ev["pid"], ev["args"]["op"])
            if ev["cat"] == "collective":
                spans[key] = ev
            else:
                ops[key].append(ev)
        calls = collections.Counter()
        for key, span in spans.items():
            if a.alg and span["args"]["alg"] == a.alg and span["args"]["coll"] == "allreduce":
                calls[key[0]] += 1
            t0, t1 = span["ts"], span["ts"] + span["dur"]
            for s in ops.get(key, []):
                if s["ts"] < t0 - 0.002 or s["ts"] + s["dur"] > t1 + 0.002:
                    fail(f"{path}: step {s['name']} {s['args']} outside its "
                         f"collective [{t0}, {t1}]: [{s['ts']}, {s['ts'] + s['dur']}]")
            if a.overlap and span["args"]["alg"] == "chunked":
                steps = sorted(ops.get(key, []), key=lambda e: e["args"]["step"])
                cin = [e for e in steps if e["name"] == "copy-in"]
                ar = [e for e in steps if e["name"] == "MPI allreduce"]
                if len(cin) != len(ar) or len(cin) < 2:
                    fail(f"{path}: op {key}: {len(cin)} copy-ins, {len(ar)} allreduces")
                for i in range(len(ar) - 1):
                    c, r = cin[i + 1], ar[i]
                    pairs += 1
                    if c["ts"] < r["ts"] + r["dur"] and r["ts"] < c["ts"] + c["dur"]:
                        overlapped += 1
        if a.calls is not None:
            for r, n in calls.items():
                if n != a.calls:
                    fail(f"{path}: rank {r}: {n} {a.alg} allreduces, expected {a.calls}")
            if not calls:
                fail(f"{path}: no {a.alg} allreduce")
    if a.ranks is not None and (len(ranks) != a.ranks or named != ranks):
        fail(f"ranks with events {sorted(ranks)}, named {sorted(named)}; "
             f"expected {a.ranks}")
    if a.overlap:
        # At least a quarter of the pairs, pooled over the files given: a
        # pipeline that does not overlap gives none; an idle machine nearly
        # all; a loaded one (a rank's threads not scheduled at once, 10 of
        # 45 on one rank under ASan beside other jobs) fewer on some rank.
        if pairs == 0 or overlapped * 4 < pairs:
            fail(f"copy-in of chunk i+1 overlaps the allreduce of chunk i in "
                 f"{overlapped} of {pairs} cases; expected a quarter or more")
        print(f"check_trace: copy-in i+1 overlaps allreduce i in {overlapped} of {pairs}")
    print(f"check_trace: ok ({len(ranks)} ranks)")


main()
