#!/usr/bin/env bash
# idempotent-onoff.sh: the cost of idempotent appends, off and on, in runs
# interleaved (off, on, on, off, ...) so that the machine's load drifts
# over both alike; prints every run and the medians.
#  1. BenchmarkSubmit and BenchmarkSubmitIdempotent (shared/star): wall
#     ns/op and cpu-ns/op (the process's CPU time per batch of 64 x 1 KiB).
#  2. strand bench in-process, Express, 4 producers x 16 streams, at a
#     fixed 20 MB/s (under saturation): ack p99, overhead p99 (ack minus
#     the modelled S3 floor: the star's own share) and the run's CPU
#     seconds (the child's user + system time, warm-up included); at a
#     fixed rate the work is fixed, so the CPU difference is the cost of
#     the dedupe path, and the throughput a saturated star loses to it is
#     that share of its CPU.
# Usage: docs/perf/idempotent-onoff.sh [rounds, default 6]
# Figures in docs/performance/ingest.md, "Idempotent appends (exactly once) on and off".
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
rounds=${1:-6}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/strand" ./cmd/strand
go test -c -o "$dir/star.test" ./shared/star
python3 - "$dir" "$rounds" <<'PY'
import json, os, re, resource, statistics, subprocess, sys
d, rounds = sys.argv[1], int(sys.argv[2])
def med(xs): return statistics.median(xs)
# 1. Go benchmarks.
gb = {"false": [], "true": []}
for i in range(rounds):
    for idem in (("false", "true") if i % 2 == 0 else ("true", "false")):
        name = "BenchmarkSubmitIdempotent$" if idem == "true" else "BenchmarkSubmit$"
        out = subprocess.run([f"{d}/star.test", "-test.run", "^$", "-test.bench", name, "-test.benchtime", "3000x"],
                             capture_output=True, text=True, check=True, cwd="shared/star").stdout
        m = re.search(r"\s([\d.]+) ns/op.*?\s([\d.]+) cpu-ns/op", out)
        gb[idem].append((float(m.group(1)), float(m.group(2))))
print("== BenchmarkSubmit (64 records of 1 KiB a batch), 3000 batches a run")
for idem in ("false", "true"):
    print(f"idempotent={idem:5}  ns/op {' '.join(f'{w:8.0f}' for w, _ in gb[idem])}  cpu-ns/op {' '.join(f'{c:8.0f}' for _, c in gb[idem])}")
off = [med([w for w, _ in gb["false"]]), med([c for _, c in gb["false"]])]
on = [med([w for w, _ in gb["true"]]), med([c for _, c in gb["true"]])]
print(f"medians: off {off[0]:.0f} ns/op, {off[1]:.0f} cpu-ns/op; on {on[0]:.0f} ns/op, {on[1]:.0f} cpu-ns/op; "
      f"cpu {100*(on[1]-off[1])/off[1]:+.1f}%")
# 2. strand bench at 20 MB/s.
sb = {"false": [], "true": []}
for i in range(rounds):
    for idem in (("false", "true") if i % 2 == 0 else ("true", "false")):
        j = f"{d}/r20-{idem}-{i}.json"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([f"{d}/strand", "bench", "--class", "express", "--producers", "4", "--streams", "16",
                        "--record-size", "1024", "--inflight", "16", "--rate", "20", "--duration", "5s",
                        "--baseline=false", "--seed", "1", f"--idempotent={idem}", "--json-out", j],
                       capture_output=True, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        r = json.load(open(j))[0]
        sb[idem].append((r["mb_per_s"], r["ack"]["p99_ms"], r["overhead"]["p99_ms"], cpu))
print("== strand bench in-process, Express, 4 producers x 16 streams, 1 KiB records, 20 MB/s offered, 5 s")
for idem in ("false", "true"):
    rs = sb[idem]
    print(f"idempotent={idem:5}  MB/s {' '.join(f'{x[0]:5.1f}' for x in rs)}  ack p99 ms {' '.join(f'{x[1]:6.2f}' for x in rs)}"
          f"  overhead p99 ms {' '.join(f'{x[2]:6.2f}' for x in rs)}  CPU s {' '.join(f'{x[3]:5.2f}' for x in rs)}")
m = {k: [med([x[i] for x in v]) for i in range(4)] for k, v in sb.items()}
o, n = m["false"], m["true"]
print(f"medians: off ack p99 {o[1]:.2f} ms, overhead p99 {o[2]:.2f} ms, CPU {o[3]:.2f} s; "
      f"on ack p99 {n[1]:.2f} ms, overhead p99 {n[2]:.2f} ms, CPU {n[3]:.2f} s; "
      f"ack p99 {n[1]-o[1]:+.2f} ms, overhead p99 {n[2]-o[2]:+.2f} ms, CPU {100*(n[3]-o[3])/o[3]:+.1f}%")
PY
