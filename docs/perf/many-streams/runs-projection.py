#!/usr/bin/env python3
"""Steady state of design 014 level 1 at a production flush age, from two
bench runs at the same stream count: one at the default FlushAge (no flush
falls in its window: absorb, settle steps, packs) and one at a short
FlushAge (it measures what one flush costs: item writes, WRU, RRU, S3
requests). Adds the flushes the window could not hold, streams / FlushAge
a second (every stream touched within the flush age: the upper bound),
each reading at most settle-period-per-flush-age run entries (one GET each,
S3 Standard) and its previous object, and putting one object.

usage: runs-projection.py WINDOW.json FLUSHRUN.json [FLUSH_AGE_S [SETTLE_EVERY_S]]
(defaults 3600 and 60: settle.DefaultFlushAge, node.DefaultPassIndexSettleEvery)"""
import json, sys

win, fl = json.load(open(sys.argv[1]))[0], json.load(open(sys.argv[2]))[0]
age = float(sys.argv[3]) if len(sys.argv) > 3 else 3600.0
every = float(sys.argv[4]) if len(sys.argv) > 4 else 60.0
PUT, GET = 0.005 / 1000, 0.0004 / 1000          # S3 Standard, per request
WRU, RRU = 0.625 / 1e6, 0.125 / 1e6             # DynamoDB on-demand, per unit
n = fl["settle"]["settle_refs"]
per = lambda key: (fl[key] - win[key]) * fl["seconds"] / n   # one flush's share
items, wru, rru = per("metastore_item_writes_per_s"), per("metastore_wru_per_s"), per("metastore_rru_per_s")
req = fl["settle"]["s3_requests"] / n
streams = win["streams"]
flushes = streams / age
gib_h = win["mb_per_s"] * 1e6 * 3600 / 2**30
meta_h = win["cost_usd_per_gb"]["metastore_usd_per_hour"] + flushes * 3600 * (wru * WRU + rru * RRU)
s3_h = flushes * 3600 * (req * PUT + (age / every + 1) * GET)
total = win["cost_usd_per_gb"]["total"] + (meta_h - win["cost_usd_per_gb"]["metastore_usd_per_hour"]) / gib_h + s3_h / gib_h
print(f"{streams} streams, FlushAge {age:g} s, settle every {every:g} s:")
print(f"  one flush (measured at FlushAge {fl['settle']['flush_age_s']:g} s, {n} SettleRef): {items:.2f} item writes, {wru:.2f} WRU, {rru:.2f} RRU, {req:.2f} S3 PUTs/LISTs")
print(f"  flushes {flushes:.2f}/s; item writes {win['metastore_item_writes_per_s']:.1f} (window) + {flushes * items:.1f} = {win['metastore_item_writes_per_s'] + flushes * items:.1f}/s")
print(f"  metastore ${meta_h:.4f}/h; flush S3 requests ${s3_h:.4f}/h (${s3_h / gib_h:.4f}/GiB, {age / every + 1:.0f} GETs a flush at most)")
print(f"  $/GiB {total:.4f}, metastore {100 * meta_h / gib_h / total:.1f}% of it")
