#!/usr/bin/env python3
"""Where a run's time went, from an operator trace (`tessera train --profile trace.json`, a
Chrome trace of LibTorch's operators):

    tessera train --config run.yaml --profile trace.json
    scripts/profile_summary.py trace.json [--top 25]

Prints, per operator name, its calls, its self time (its own time minus the operators it
called, per thread) and its total time, sorted by self time; and the span the trace covers.
Self times add up to the time spent inside operators; the rest of the span is the trainer's
own C++ (data reading, bookkeeping) and waits.
"""
import argparse
import collections
import json


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    events = [e for e in json.load(open(a.trace)) if e.get("ph") == "X"]
    if not events:
        raise SystemExit(f"{a.trace}: no complete ('X') events: not an operator trace")
    by_thread = collections.defaultdict(list)
    for e in events:
        by_thread[e.get("tid")].append(e)
    self_us, total_us, calls = collections.Counter(), collections.Counter(), collections.Counter()
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []  # (end, name) of the operators enclosing the current one
        for e in evs:
            while stack and stack[-1][0] <= e["ts"]:
                stack.pop()
            dur = e["dur"]
            calls[e["name"]] += 1
            if not any(name == e["name"] for _, name in stack):  # recursion counted once in total
                total_us[e["name"]] += dur
            self_us[e["name"]] += dur
            if stack:
                self_us[stack[-1][1]] -= dur
            stack.append((e["ts"] + dur, e["name"]))
    span = (max(e["ts"] + e["dur"] for e in events) - min(e["ts"] for e in events)) / 1e6
    inside = sum(self_us.values()) / 1e6
    print(f"{a.trace}: {len(events)} operator calls over {span:.3f} s; {inside:.3f} s inside operators "
          f"({100 * inside / span:.0f}%, summed over threads)")
    print(f"{'operator':<58} {'calls':>7} {'self s':>9} {'self %':>7} {'total s':>9}")
    for name, us in self_us.most_common(a.top):
        print(f"{name[:58]:<58} {calls[name]:>7} {us / 1e6:>9.4f} {100 * us / 1e6 / span:>6.1f}% {total_us[name] / 1e6:>9.4f}")


if __name__ == "__main__":
    main()
