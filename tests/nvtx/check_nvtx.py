#!/usr/bin/env python3
"""Check the NVTX ranges collar gave a tool, as tests/nvtx/nvtx_inject.c
wrote them down (one file per process): nvtx.test.

Usage: check_nvtx.py [--ranks N] [--coll NAME] [--alg ALG] [--bytes N]
                     [--calls N] [--phases a,b,...] [--chunks N]
                     [--no-steps] FILE...

Every range of the collar domain is closed, once, no earlier than it
started; the collectives' ranges are named "COLL ALG" with the bytes as
payload; with --phases, every listed phase has ranges inside each
collective's range, and every phase range lies inside a collective's
range of its process; --chunks: that many copy-in ranges per collective.
"""
import argparse
import os
import sys

COLLS = {"allreduce", "bcast", "allgather", "allgatherv", "alltoall",
         "alltoallv", "reduce_scatter", "reduce_scatter_block", "reduce",
         "gather", "gatherv", "scatter", "scatterv"}


def fail(msg):
    print("check_nvtx: FAIL: " + msg)
    sys.exit(1)


def read(path):
    domains, starts, ends = {}, {}, {}
    with open(path) as f:
        for line in f:
            w = line.rstrip("\n").split(" ")
            if w[0] == "domain":
                domains[w[1]] = " ".join(w[2:])
            elif w[0] == "start":
                starts[w[1]] = {"tid": w[2], "t0": int(w[3]), "domain": w[4],
                                "cat": w[5], "payload": w[6],
                                "msg": " ".join(w[7:])}
            elif w[0] == "end":
                if w[1] in ends:
                    fail(f"{path}: range {w[1]} ended twice")
                ends[w[1]] = int(w[3])
            elif w[0] in ("push", "pop"):
                fail(f"{path}: collar uses start/end ranges, saw {w[0]}")
    return domains, starts, ends


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int)
    ap.add_argument("--coll", default="allreduce")
    ap.add_argument("--alg")
    ap.add_argument("--bytes", type=int)
    ap.add_argument("--calls", type=int)
    ap.add_argument("--phases", default="")
    ap.add_argument("--chunks", type=int)
    ap.add_argument("--no-steps", action="store_true")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    phases = [p for p in a.phases.split(",") if p]
    seen = 0
    for path in a.files:
        if not os.path.exists(path):
            continue   # an unmatched glob: no process wrote this
        domains, starts, ends = read(path)
        ids = [d for d, n in domains.items() if n == "collar"]
        if not ids:
            continue
        seen += 1
        if len(ids) != 1:
            fail(f"{path}: {len(ids)} collar domains")
        ranges = []
        for rid, s in starts.items():
            if s["domain"] != ids[0]:
                continue
            if rid not in ends:
                fail(f"{path}: range {rid} '{s['msg']}' never ended")
            if ends[rid] < s["t0"]:
                fail(f"{path}: range {rid} ends before it starts")
            ranges.append(dict(s, t1=ends[rid]))
        colls = [r for r in ranges if r["msg"].split(" ")[0] in COLLS]
        steps = [r for r in ranges if r not in colls]
        mine = [r for r in colls if r["msg"].split(" ")[0] == a.coll]
        if a.calls is not None and len(mine) != a.calls:
            fail(f"{path}: {len(mine)} {a.coll} ranges, expected {a.calls}: "
                 + ", ".join(r["msg"] for r in colls))
        for r in mine:
            if a.alg and r["msg"] != f"{a.coll} {a.alg}":
                fail(f"{path}: range '{r['msg']}', expected '{a.coll} {a.alg}'")
            if a.bytes is not None and r["payload"] != str(a.bytes):
                fail(f"{path}: '{r['msg']}' payload {r['payload']}, expected {a.bytes}")
        if a.no_steps and steps:
            fail(f"{path}: step ranges at level coll: {steps[0]['msg']}")
        for s in steps:
            if not any(c["t0"] <= s["t0"] and s["t1"] <= c["t1"] for c in colls):
                fail(f"{path}: step '{s['msg']}' outside every collective's range")
        for c in mine:
            inside = [s for s in steps if c["t0"] <= s["t0"] and s["t1"] <= c["t1"]]
            names = {s["msg"] for s in inside}
            for p in phases:
                if p not in names:
                    fail(f"{path}: no '{p}' range inside '{c['msg']}' "
                         f"(saw: {', '.join(sorted(names))})")
            if a.chunks is not None:
                n = sum(1 for s in inside if s["msg"] == "copy-in")
                if n != a.chunks:
                    fail(f"{path}: {n} copy-in ranges in '{c['msg']}', expected {a.chunks}")
    if a.ranks is not None and seen != a.ranks:
        fail(f"{seen} processes with a collar domain, expected {a.ranks}")
    print(f"check_nvtx: ok ({seen} processes)")


main()
