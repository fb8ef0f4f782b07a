#!/usr/bin/env python3
"""The level 2 (merged runs, design 014) columns of `strand bench
--pass-index --fanout N` results, one markdown row per file (runs-table.py
prints the level 1 columns of the same files).

usage: level2-table.py RESULTS.json..."""
import json, sys

print("| streams | fanout | MB/s | metastore item writes/s | metastore share of $/GiB | $/GiB | settle PUTs+LISTs $/GiB | GETs $/GiB | settle steps | merges | entries merged | peak heap (MiB) | heap at end (MiB) |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for path in sys.argv[1:]:
    for r in json.load(open(path)):
        s, c = r["settle"], r["cost_usd_per_gb"]
        share = c["metastore_share"]
        print(f"| {r['streams']} | {s['fanout']} | {r['mb_per_s']:.2f} | {r['metastore_item_writes_per_s']:.1f} | {100 * share:.1f}% | {c['total']:.4f} "
              f"| {c['settle_puts_modelled']:.6f} | {c.get('gets', 0):.6f} | {s['steps']} | {s['merges']} | {s['merged_streams']} "
              f"| {r['peak_heap_mib']:.0f} | {r['heap']['end_mib']:.0f} |")
