#!/usr/bin/env python3
"""API catch-up (one reader, 256 MB backlog), pass index and refs run in
alternation (api2-true-N: --pass-index=true, api2-false-N: false): every
run's MB/s and each mode's median.

    python3 docs/perf/2026-12-02-reads-pass-index/api-alternating/medians.py
"""
import glob, json, os, statistics
here = os.path.dirname(os.path.abspath(__file__))
for mode, label in (("true", "pass index"), ("false", "refs")):
    runs = sorted(glob.glob(os.path.join(here, f"api2-{mode}-*.json")), key=lambda p: int(p.rsplit("-", 1)[1][:-5]))
    mbps = [json.load(open(p))[0]["read"]["mb_per_s"] for p in runs]
    cpu = [json.load(open(p))[0]["read"]["cpu_seconds_per_gb"] for p in runs]
    print(f"{label}: {len(mbps)} runs, MB/s " + ", ".join(f"{v:.1f}" for v in mbps) +
          f"; median {statistics.median(mbps):.1f}; CPU-s/GiB median {statistics.median(cpu):.2f}")
