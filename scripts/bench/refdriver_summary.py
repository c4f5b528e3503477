#!/usr/bin/env python3
"""Summarise refdriver runs made by scripts/bench/refdriver.sh: medians over the runs.

Usage: refdriver_summary.py OUT_DIR   (reads OUT_DIR/run*/results.jsonl and cpu.log)

Per measured step: msg/s, reply p50/p99, bot CPU per message, LLM calls and VS Agent posts per
message, errors, and what the machine did meanwhile (busy core-seconds from /proc/stat minus
the bot, PostgreSQL and the driver = "others"). Memory: RSS at idle, after the 1000-user step.
"""
import glob
import json
import os
import statistics
import sys
from datetime import datetime

CLK_TCK = 100.0


def ts(s):
    return datetime.fromisoformat(s).timestamp()


def load_cpu(path):
    """[(t, busy_ticks, total_ticks)] from the sampler's lines: '<epoch> cpu user nice ...'."""
    out = []
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) < 9 or parts[1] != "cpu":
                    continue
                v = [int(x) for x in parts[2:]]
                idle = v[3] + (v[4] if len(v) > 4 else 0)
                total = sum(v[:8])
                out.append((float(parts[0]), total - idle, total))
    except FileNotFoundError:
        pass
    return out


def busy_between(samples, t0, t1):
    """Busy core-seconds between the samples nearest t0 and t1 (None when not covered)."""
    if not samples or t0 < samples[0][0] or t1 > samples[-1][0] + 0.5:
        return None
    a = max((s for s in samples if s[0] <= t0), key=lambda s: s[0], default=samples[0])
    b = min((s for s in samples if s[0] >= t1), key=lambda s: s[0], default=samples[-1])
    if b[0] <= a[0]:
        return None
    return (b[1] - a[1]) / CLK_TCK, b[0] - a[0]


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, nd=1):
    if x is None:
        return "–"
    if nd == 0:
        return f"{x:,.0f}"
    return f"{x:,.{nd}f}"


def main():
    out = sys.argv[1]
    runs = sorted(glob.glob(os.path.join(out, "run*")))
    steps = {}  # step -> [result per run]
    order = []
    for r in runs:
        cpu = load_cpu(os.path.join(r, "cpu.log"))
        try:
            lines = open(os.path.join(r, "results.jsonl")).read().splitlines()
        except FileNotFoundError:
            continue
        for line in lines:
            res = json.loads(line)
            st = res["step"]
            if st not in steps:
                steps[st] = []
                order.append(st)
            if res["kind"] not in ("idle", "settle"):
                # Bot, PostgreSQL and driver CPU are read by the driver just before the measured
                # phase and after its quiet second; nearly all of it is spent during the active
                # period (first send to last reply, wall_sec), so the shares are per active
                # second, and the machine's busy cores are read over that same period.
                t0 = ts(res["measure_start"])
                wall = res["wall_sec"]
                b = busy_between(cpu, t0, t0 + wall) if wall else None
                if b is not None:
                    busy, span = b
                    res["_machine_busy"] = busy / span  # cores busy on average
                    res["_others"] = max(0.0, busy / span - (res["bot_cpu_sec"] + res["aux_cpu_sec"] + res["driver_cpu_sec"]) / wall)
            steps[st].append(res)

    print(f"runs: {len(runs)} ({out})\n")
    print("| step | msg/s (median; runs) | reply p50 / p99 ms | bot CPU ms/msg | LLM calls/msg | VS Agent posts/msg | errors | RSS end MB | cores busy while active: machine / bot / PG / driver / others |")
    print("|---|---|---|---|---|---|---|---|---|")
    for st in order:
        rs = steps[st]
        if rs[0]["kind"] in ("idle", "settle"):
            continue
        mps = [x["msgs_per_sec"] for x in rs]
        errs = sum(sum(v for v in x["errors"].values()) for x in rs)

        def per_wall(key):
            return med([x[key] / x["wall_sec"] if x["wall_sec"] else None for x in rs])

        print(
            f"| {st} | {fmt(med(mps), 0)} ({', '.join(fmt(m, 0) for m in mps)})"
            f" | {fmt(med(x['reply_latency']['p50_ms'] for x in rs))} / {fmt(med(x['reply_latency']['p99_ms'] for x in rs))}"
            f" | {fmt(med(x['bot_cpu_ms_per_msg'] for x in rs), 2)}"
            f" | {fmt(med(x['llm_calls_per_msg'] for x in rs), 2)}"
            f" | {fmt(med(x['vs_posts_per_msg'] for x in rs), 2)} {json.dumps(rs[0]['vs_posts_per_msg_by_type'], sort_keys=True)}"
            f" | {errs}"
            f" | {fmt(med(x['rss_end_kb'] / 1024 for x in rs))}"
            f" | {fmt(med(x.get('_machine_busy') for x in rs), 2)} / {fmt(per_wall('bot_cpu_sec'), 2)} / {fmt(per_wall('aux_cpu_sec'), 2)}"
            f" / {fmt(per_wall('driver_cpu_sec'), 2)} / {fmt(med(x.get('_others') for x in rs), 2)} |"
        )
    print()
    for st in order:
        rs = steps[st]
        if rs[0]["kind"] in ("idle", "settle"):
            print(f"- {st}: RSS {fmt(med(x['rss_end_kb'] / 1024 for x in rs))} MB (runs: {', '.join(fmt(x['rss_end_kb'] / 1024) for x in rs)}),"
                  f" VmHWM {fmt(med(x['vmhwm_end_kb'] / 1024 for x in rs))} MB")
        elif rs[0]["kind"] == "mem":
            print(f"- {st}: RSS at end {fmt(med(x['rss_end_kb'] / 1024 for x in rs))} MB, sampled peak {fmt(med(x['rss_peak_sampled_kb'] / 1024 for x in rs))} MB,"
                  f" VmHWM {fmt(med(x['vmhwm_end_kb'] / 1024 for x in rs))} MB (reset at step start: {rs[0]['vmhwm_reset_at_start']})")
    print()
    for st in order:
        rs = steps[st]
        if rs[0]["kind"] in ("idle", "settle"):
            continue
        e = {}
        for x in rs:
            for k, v in x["errors"].items():
                e[k] = e.get(k, 0) + v
        nz = {k: v for k, v in e.items() if v}
        setup = rs[0].get("setup_vs_posts_by_type")
        print(f"- {st}: errors {nz or 'none'}; setup posts (run 1) {json.dumps(setup, sort_keys=True)};"
              f" LLM per msg {json.dumps(rs[0]['llm_calls_per_msg_by_kind'], sort_keys=True)};"
              f" MCP per msg {json.dumps(rs[0]['mcp_methods_per_msg'], sort_keys=True)};"
              f" ack p50 {fmt(med(x['webhook_ack_latency']['p50_ms'] for x in rs))} ms")


if __name__ == "__main__":
    main()
