#!/usr/bin/env python3
"""Prints the rows of docs/performance/settle.md "End to end" (the pass index,
settle in the window), from the bench's JSON results given as arguments."""
import json, sys

print("| streams | flush age | MB/s | batches/s | metastore item writes/s | WRU/s | RRU/s | metastore $/h | metastore share of $/GiB | $/GiB | index PUTs $/GiB | settle PUTs+LISTs $/GiB | GETs $/GiB | settle steps | packed entries | packs | flushes (SettleRef) | heap at end (MiB) | ack p99 ms |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for path in sys.argv[1:]:
    for r in json.load(open(path)):
        c, s = r["cost_usd_per_gb"], r["settle"]
        print("| %d | %gs | %.2f | %.0f | %.1f | %.1f | %.1f | %.4f | %.0f%% | %.6f | %.6f | %.6f | %.6f | %d | %d | %d | %d | %.0f | %.2f |" % (
            r["streams"], s["flush_age_s"], r["mb_per_s"], r["batches"] / r["seconds"], r["metastore_item_writes_per_s"],
            r["metastore_wru_per_s"], r["metastore_rru_per_s"], c["metastore_usd_per_hour"], 100 * c["metastore_share"],
            c["total"], c.get("index_puts", 0), c["settle_puts_modelled"], c.get("gets", 0), s["steps"], s["packed"], s["packs"],
            s.get("settle_refs", 0), r["heap"]["end_mib"], r["ack"]["p99_ms"]))
