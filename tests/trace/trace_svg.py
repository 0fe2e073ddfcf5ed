#!/usr/bin/env python3
"""Draw a COLLAR_TRACE timeline (a rank's file or collar-trace-merge's) as
an SVG: a row per rank and track (collectives, MPI, host, streams), a box
per event, coloured by phase.  docs/stats.md's picture is made with it:

    trace_svg.py [--op N] [--width PX] [--title TEXT] TRACE.json > timeline.svg

--op N: only the collective numbered N (args.op) on each rank.
"""
import argparse
import html
import json
import sys

COLORS = {
    "copy-in": "#4c72b0", "copy-out": "#55a868", "copy": "#64b5cd",
    "MPI allreduce": "#c44e52", "MPI send": "#c44e52", "MPI receive": "#dd8452",
    "MPI collective": "#c44e52", "reduction": "#8172b2",
    "host reduction": "#8172b2", "IPC signal": "#ccb974",
    "status agreement": "#ccb974", "wait for caller": "#8c8c8c",
    "set-up": "#8c8c8c",
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--op", type=int)
    ap.add_argument("--width", type=int, default=900)
    ap.add_argument("--title", help="the picture's title (default: the file's name)")
    a = ap.parse_args()
    with open(a.trace) as f:
        doc = json.load(f)
    names, events = {}, []
    for ev in doc["traceEvents"]:
        if ev.get("ph") == "M" and ev.get("name") == "thread_name":
            names[(ev["pid"], ev["tid"])] = ev["args"]["name"]
        elif ev.get("ph") == "X" and (a.op is None or ev["args"]["op"] == a.op):
            events.append(ev)
    if not events:
        sys.exit("trace_svg: no events to draw")
    rows = sorted({(e["pid"], e["tid"]) for e in events})
    t0 = min(e["ts"] for e in events)
    t1 = max(e["ts"] + e["dur"] for e in events)
    label_w, row_h, top = 150, 22, 30
    scale = (a.width - label_w - 10) / max(t1 - t0, 1e-9)
    height = top + row_h * len(rows) + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{a.width}" '
           f'height="{height}" font-family="sans-serif" font-size="11">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="4" y="16" font-size="12">{html.escape(a.title or a.trace.split("/")[-1])}: '
           f'{t1 - t0:.0f} us</text>']
    for i, (pid, tid) in enumerate(rows):
        y = top + i * row_h
        label = f"rank {pid} {names.get((pid, tid), tid)}"
        out.append(f'<text x="4" y="{y + 15}">{html.escape(label)}</text>')
        out.append(f'<line x1="{label_w}" y1="{y + row_h - 1}" x2="{a.width - 10}" '
                   f'y2="{y + row_h - 1}" stroke="#eee"/>')
    for e in events:
        y = top + rows.index((e["pid"], e["tid"])) * row_h
        x = label_w + (e["ts"] - t0) * scale
        w = max(e["dur"] * scale, 1.0)
        color = "#7f7f7f" if e["cat"] == "collective" else COLORS.get(e["name"], "#dddddd")
        title = f'{e["name"]} {e["args"].get("bytes", 0)} B, {e["dur"]:.1f} us'
        out.append(f'<rect x="{x:.1f}" y="{y + 2}" width="{w:.1f}" height="{row_h - 5}" '
                   f'fill="{color}" stroke="white" stroke-width="0.5">'
                   f'<title>{html.escape(title)}</title></rect>')
        if w > 60:
            out.append(f'<text x="{x + 3:.1f}" y="{y + 15}" fill="white">'
                       f'{html.escape(e["name"])}</text>')
    y = top + row_h * len(rows) + 16
    out.append(f'<text x="{label_w}" y="{y}">0 us</text>')
    out.append(f'<text x="{a.width - 10}" y="{y}" text-anchor="end">{t1 - t0:.0f} us</text>')
    x = label_w + 80
    for name in ("copy-in", "MPI allreduce", "copy-out", "status agreement"):
        out.append(f'<rect x="{x}" y="{y + 6}" width="10" height="10" fill="{COLORS[name]}"/>')
        out.append(f'<text x="{x + 14}" y="{y + 15}">{name}</text>')
        x += 120
    out.append("</svg>")
    print("\n".join(out))


main()
