#!/usr/bin/env python3
"""Steady state of design 014 level 2 (merged runs) at a production flush
age, from two bench runs: WINDOW.json, a `strand bench --pass-index` run
with merges in its window (a small --fanout), and FLUSHRUN.json, a run at
a short --flush-age that measures what one flush costs (item writes, WRU,
RRU, S3 requests; it does not depend on the stream count). Adds what the
window cannot hold:

  - flushes: streams / FlushAge a second (every stream touched within the
    flush age: the upper bound), each reading one GET per live run that
    holds the stream (at most FlushAge / (Fanout x settle) merged runs and
    Fanout - 1 level-1 runs) and its previous object, and putting one;
  - merges at the production Fanout: one cursor write per Fanout settle
    steps (the window's merge writes, made at a small fanout, are taken
    out), and the merge's S3 requests per GiB as measured;
  - the window's memory: one entry per stream per live run it is in, at
    HEAP bytes an entry (BenchmarkWindowMemory), with the streams a run
    holds = min(streams, batches in its span) when the bench's producers
    take streams in turn (--stream-order sweep, its default), or
    streams x (1 - exp(-batches in its span / streams)) when random.

usage: level2-projection.py WINDOW.json FLUSHRUN.json STREAMS [FLUSH_AGE_S [SETTLE_EVERY_S [FANOUT [HEAP_B]]]]
(defaults 86400, 60, 60, 144: settle.DefaultFlushAge,
node.DefaultPassIndexSettleEvery, settle.DefaultFanout, the measured heap
bytes per decoded entry). STREAMS may differ from WINDOW's stream count:
the window's per-second figures do not depend on it (design 014)."""
import json, math, sys

win, fl = json.load(open(sys.argv[1]))[0], json.load(open(sys.argv[2]))[0]
streams = int(sys.argv[3])
age = float(sys.argv[4]) if len(sys.argv) > 4 else 86400.0
every = float(sys.argv[5]) if len(sys.argv) > 5 else 60.0
fanout = int(sys.argv[6]) if len(sys.argv) > 6 else 60
heap = float(sys.argv[7]) if len(sys.argv) > 7 else 144.0
PUT, GET = 0.005 / 1000, 0.0004 / 1000          # S3 Standard, per request
WRU, RRU = 0.625 / 1e6, 0.125 / 1e6             # DynamoDB on-demand, per unit
n = fl["settle"]["settle_refs"]
per = lambda key: (fl[key] - win[key]) * fl["seconds"] / n   # one flush's share
items, wru, rru = per("metastore_item_writes_per_s"), per("metastore_wru_per_s"), per("metastore_rru_per_s")
req = fl["settle"]["s3_requests"] / n
s = win["settle"]
merges_s = s["merges"] / win["seconds"]                      # in the window, at its fanout
merged_runs = age / (fanout * every)
runs_max = merged_runs + fanout - 1
flushes = streams / age
gib_h = win["mb_per_s"] * 1e6 * 3600 / 2**30
# Item writes: the window's, less its merges' cursor writes (1 each), plus
# production's merges and the flushes.
win_items = win["metastore_item_writes_per_s"] - merges_s + 1 / (fanout * every)
meta_h = win["cost_usd_per_gb"]["metastore_usd_per_hour"] + flushes * 3600 * (wru * WRU + rru * RRU)
s3_h = flushes * 3600 * (req * PUT + (runs_max + 1) * GET)
total = win["cost_usd_per_gb"]["total"] + (meta_h - win["cost_usd_per_gb"]["metastore_usd_per_hour"]) / gib_h + s3_h / gib_h
batches_s = win["batches"] / win["seconds"]
if win.get("stream_order", "sweep") == "sweep":   # producers take streams in turn
    distinct = lambda span: min(streams, batches_s * span)
else:                                              # uniformly random
    distinct = lambda span: streams * (1 - math.exp(-batches_s * span / streams))
entries = (fanout - 1) * distinct(every) + merged_runs * distinct(fanout * every)
print(f"{streams} streams, FlushAge {age:g} s, settle every {every:g} s, Fanout {fanout}:")
print(f"  window ({win['streams']} streams, fanout {s['fanout']}, {win['seconds']:.0f} s): {s['steps']} steps, {s['merges']} merges "
      f"({s['merged_streams']} entries), item writes {win['metastore_item_writes_per_s']:.1f}/s, $/GiB {win['cost_usd_per_gb']['total']:.4f}")
print(f"  one flush (measured at FlushAge {fl['settle']['flush_age_s']:g} s, {n} SettleRef): {items:.2f} item writes, {wru:.2f} WRU, {rru:.2f} RRU, {req:.2f} S3 PUTs/LISTs")
print(f"  flushes {flushes:.2f}/s; item writes {win_items:.1f} (window, merges at Fanout {fanout}) + {flushes * items:.1f} = {win_items + flushes * items:.1f}/s")
print(f"  metastore ${meta_h:.4f}/h; flush S3 requests ${s3_h:.4f}/h (${s3_h / gib_h:.4f}/GiB, {runs_max + 1:.0f} GETs a flush at most)")
print(f"  $/GiB {total:.4f}, metastore {100 * meta_h / gib_h / total:.1f}% of it")
print(f"  live runs at most {runs_max:.0f} ({merged_runs:.0f} merged, {fanout - 1} level-1); window entries {entries / 1e6:.1f} M, "
      f"{entries * heap / 2**30:.2f} GiB decoded at {heap:g} B an entry (per process caching the window)")
