#!/usr/bin/env python3
"""Summarise scripts/bench/replicas.sh runs: per measured step, total msg/s, reply p50/p99 and
each replica's CPU per message (from replicas_cpu.log), medians over the runs.

Usage: replicas_summary.py OUT_DIR
"""
import glob
import json
import os
import statistics
import sys
from datetime import datetime

CLK_TCK = 100.0


def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def samples(path):
    out = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) > 1:
                out.append((float(parts[0]), [int(float(x)) for x in parts[1:]]))
    return out


def cpu_between(ss, t0, t1):
    a = max((s for s in ss if s[0] <= t0), key=lambda s: s[0], default=None)
    b = min((s for s in ss if s[0] >= t1), key=lambda s: s[0], default=None)
    if a is None or b is None:
        return None
    return [(y - x) / CLK_TCK for x, y in zip(a[1], b[1])]


def main(out):
    steps = {}
    for run in sorted(glob.glob(os.path.join(out, "run*"))):
        ss = samples(os.path.join(run, "replicas_cpu.log"))
        with open(os.path.join(run, "results.jsonl")) as f:
            for line in f:
                r = json.loads(line)
                if r["kind"] not in ("run", "warm") or not r["messages"]:
                    continue
                cpu = cpu_between(ss, ts(r["measure_start"]), ts(r["measure_end"]))
                d = steps.setdefault(r["step"], {"rate": [], "p50": [], "p99": [], "cpu": [], "err": 0})
                d["rate"].append(r["msgs_per_sec"])
                d["p50"].append(r["reply_latency"]["p50_ms"])
                d["p99"].append(r["reply_latency"]["p99_ms"])
                d["err"] += sum(r["errors"].values())
                if cpu:
                    d["cpu"].append([c * 1000 / r["messages"] for c in cpu])
    print("| step | msg/s (median; runs) | reply p50 / p99 ms | CPU ms/msg per replica (sum) | errors |")
    print("|---|---|---|---|---|")
    for step, d in steps.items():
        per = [statistics.median(col) for col in zip(*d["cpu"])] if d["cpu"] else []
        runs = ", ".join(f"{x:,.0f}" for x in d["rate"])
        print(f"| {step} | {statistics.median(d['rate']):,.0f} ({runs}) | {statistics.median(d['p50']):.1f} / "
              f"{statistics.median(d['p99']):.1f} | {' / '.join(f'{x:.2f}' for x in per)} ({sum(per):.2f}) | {d['err']} |")


if __name__ == "__main__":
    main(sys.argv[1])
