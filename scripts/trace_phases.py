#!/usr/bin/env python3
"""Where a traced decode step's time goes, per layer: the critical path through a Chrome trace
written by `eventide bench decode --trace` (or any traced megakernel step with layered groups).

For each stage in --order (task groups whose first tile coordinate is the layer), it takes the
stage's last-ending task and splits its time into
  hop     from the previous stage's end to the end of this task's wait (hand-off, polling and the
          previous task's trace bookkeeping on this SM),
  share   the block barrier that hands the wait's outcome to every thread,
  body    the phases between the body's block barriers (`barriers_us` in the trace),
  notify  from the last barrier to the task's end (notifications).
It prints the medians over layers --first..--last, then the gaps between a worker's consecutive
tasks (from one task's end to the next one's start: its trace bookkeeping, the inline queue's
check, the scheduler's next task) by the pair of groups, over the whole step.

  python3 scripts/trace_phases.py TRACE.json.gz --order qkv,attention,merge,o_proj,gate_up,down
"""
import argparse
import collections
import gzip
import json
import re
import statistics


def load_tasks(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("cat") == "task"]


def group_of(task):
    return task["name"].split("(")[0]


def by_stage_and_layer(tasks):
    by_stage = collections.defaultdict(list)  # (group, layer) -> tasks
    for e in tasks:
        m = re.match(r"(\w+)\(([^)]*)\)", e["name"])
        if m and m.group(2).strip():
            by_stage[(m.group(1), int(m.group(2).split(",")[0]))].append(e)
    return by_stage


def worker_gaps(tasks):
    """(group before, group after) -> {count, median_us, p10_us, p90_us} of the idle time between
    consecutive tasks of one worker (one Chrome trace thread); with the traces that carry them,
    also the medians of its parts: writing the first task's record, from there to the inline
    queue's hand-out (the block barrier before the second task), and from it to the start."""
    by_worker = collections.defaultdict(list)
    for e in tasks:
        by_worker[(e["pid"], e["tid"])].append(e)
    gaps = collections.defaultdict(list)
    parts = collections.defaultdict(list)
    for run in by_worker.values():
        run.sort(key=lambda e: e["ts"])
        for a, b in zip(run, run[1:]):
            end = a["ts"] + a["dur"]
            gaps[(group_of(a), group_of(b))].append(b["ts"] - end)
            if "recorded_after_us" in a["args"] and "handout_before_us" in b["args"]:
                recorded, handout = end + a["args"]["recorded_after_us"], b["ts"] - b["args"]["handout_before_us"]
                parts[(group_of(a), group_of(b))].append((recorded - end, handout - recorded, b["ts"] - handout))
    out = {}
    for pair, v in sorted(gaps.items(), key=lambda kv: -len(kv[1])):
        v.sort()
        out[pair] = {"count": len(v), "median_us": statistics.median(v), "p10_us": v[len(v) // 10],
                     "p90_us": v[9 * len(v) // 10]}
        if parts[pair]:
            out[pair]["parts_median_us"] = {
                name: statistics.median(p[i] for p in parts[pair])
                for i, name in enumerate(("record", "to_handout", "handout_to_start"))}
    return out


def critical_path(by_stage, order, first, last):
    rows = collections.defaultdict(list)
    layers = []
    for layer in range(first, last + 1):
        prev = max(e["ts"] + e["dur"] for e in by_stage[(order[-1], layer - 1)])
        begin = prev
        for group in order:
            task = max(by_stage[(group, layer)], key=lambda e: e["ts"] + e["dur"])
            wait = task["args"]["wait_us"]
            marks = [wait] + task["args"].get("barriers_us", []) + [task["dur"]]
            rows[group].append([task["ts"] + wait - prev] + [b - a for a, b in zip(marks, marks[1:])])
            prev = task["ts"] + task["dur"]
        layers.append(prev - begin)
    stages = {}
    for group in order:
        n = min(len(r) for r in rows[group])
        med = [statistics.median(r[i] for r in rows[group]) for i in range(n)]
        stages[group] = {"stage_us": sum(med), "hop_us": med[0], "share_us": med[1],
                         "body_phases_us": med[2:-1], "notify_us": med[-1]}
    return statistics.median(layers), stages


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace", help="Chrome trace JSON (.json or .json.gz) of one step")
    p.add_argument("--order", required=True, help="the layer's stages in dependency order, comma-separated")
    p.add_argument("--first", type=int, default=2, help="first layer to take (default 2: past the warm-up)")
    p.add_argument("--last", type=int, default=None, help="last layer to take (default: the last but one)")
    p.add_argument("--json", help="also write the result as JSON to this file")
    a = p.parse_args()
    tasks = load_tasks(a.trace)
    by_stage = by_stage_and_layer(tasks)
    order = a.order.split(",")
    missing = [g for g in order if not any(k[0] == g for k in by_stage)]
    if missing:
        p.error(f"no layered tasks named {', '.join(missing)} in {a.trace}")
    last = a.last if a.last is not None else max(k[1] for k in by_stage if k[0] == order[0]) - 1
    layer_us, stages = critical_path(by_stage, order, a.first, last)
    print(f"layer (median of {a.first}..{last}): {layer_us:.1f} us")
    for g, s in stages.items():
        body = " ".join(f"{x:5.2f}" for x in s["body_phases_us"])
        print(f"{g:22s} {s['stage_us']:6.2f} | hop {s['hop_us']:5.2f} | share {s['share_us']:4.2f} | "
              f"body {body} | notify {s['notify_us']:4.2f}")
    gaps = worker_gaps(tasks)
    print("gaps between a worker's consecutive tasks, us:")
    for (before, after), g in gaps.items():
        split = g.get("parts_median_us")
        print(f"  {before + ' -> ' + after:26s} {g['count']:6d} tasks  median {g['median_us']:5.2f}  "
              f"p10 {g['p10_us']:5.2f}  p90 {g['p90_us']:5.2f}" +
              (f"  | record {split['record']:4.2f}, to the hand-out {split['to_handout']:4.2f}, "
               f"then to the start {split['handout_to_start']:4.2f}" if split else ""))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"layer_us": layer_us, "stages": stages,
                       "gaps": {f"{b} -> {c}": g for (b, c), g in gaps.items()}}, f, indent=1)


if __name__ == "__main__":
    main()
