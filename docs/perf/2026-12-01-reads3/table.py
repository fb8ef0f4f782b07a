#!/usr/bin/env python3
"""Prints the reads3 catch-up and tail rows of docs/performance/reads.md from the
JSON that docs/perf/reads3.sh wrote, one row per run directory given
(default: this directory and run2/).

    python3 docs/perf/2026-12-01-reads3/table.py [DIR ...]
"""
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
dirs = sys.argv[1:] or [here, os.path.join(here, "run2")]


def rows(d, name):
    with open(os.path.join(d, name + ".json")) as f:
        return json.load(f)


print("| run | dir | aggregate MB/s | per reader MB/s (min / mean) | read window s | chain GETs / GiB | settled GETs / GiB | bytes fetched per byte read | metastore reads / GiB | CPU-s / GiB |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for d in dirs:
    tag = os.path.relpath(d, here)
    for name in ["catchup-inproc-s1", "catchup-inproc-s4", "catchup-inproc-s16", "fanout-inproc", "catchup-api-s1"]:
        for r in rows(d, name):
            rd = r["read"]
            if rd["workload"] != "catchup":
                continue
            print(f"| {r['name']} | {tag} | **{rd['mb_per_s']:.1f}** | {rd['reader_mb_per_s_min']:.1f} / {rd['reader_mb_per_s_mean']:.1f} | {rd['seconds']:.2f} "
                  f"| {rd['chain_gets_per_gb']:.0f} | {rd['settled_gets_per_gb']:.0f} | {rd['get_bytes_per_byte']:.2f} | {rd['metastore_reads_per_gb']:.0f} | {rd['cpu_seconds_per_gb']:.2f} |")

print()
print("| run | dir | readers | ack p50 / p99 / p999 ms | end-to-end p50 / p99 / p999 ms | gap at p99 ms | read CPU-s |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for d in dirs:
    tag = os.path.relpath(d, here)
    for name in ["tail-inproc", "tail-api", "fanout-inproc"]:
        for r in rows(d, name):
            rd = r["read"]
            if rd["workload"] == "catchup":
                continue
            a, e = r["ack"], rd["end_to_end"]
            print(f"| {r['name']} | {tag} | {rd['readers_per_stream']} x {r['streams']} | {a['p50_ms']:.2f} / {a['p99_ms']:.2f} / {a['p999_ms']:.2f} "
                  f"| {e['p50_ms']:.2f} / {e['p99_ms']:.2f} / {e['p999_ms']:.2f} | {e['p99_ms'] - a['p99_ms']:+.2f} | {rd['cpu_seconds']:.2f} |")
