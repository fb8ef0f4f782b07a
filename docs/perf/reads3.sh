#!/bin/sh
# Reruns the catch-up, fan-out, API and tail rows of
# docs/performance/reads.md (the catch-up table and the tail table), one
# command at a time, writing JSON (and the read-window CPU profiles) into
# $OUT. Run it on an otherwise idle machine, from the repository's root:
#
#   docs/perf/reads3.sh
#
# Environment:
#   OUT       where results go (default docs/perf/2026-12-01-reads3)
#   DIV       divide every backlog by this (default 1; a smoke test of the
#             script: DIV=16 OUT=/tmp/r3 docs/perf/reads3.sh)
#   DURATION  the tail and fan-out tail runs' duration (default 10s / 5s)
#   STRAND    a strand binary to use (default: built from this tree)
#   EXTRA     more strand bench flags for every run (EXTRA=--pass-index=false:
#             refs mode, as the 2026-12-01 rows ran; default: none, the
#             pass index)
#   PAUSE     seconds between runs (default 5: the machine reclaims a run's
#             memory)
#
# Each catch-up row's CPU-s/GiB (cpu_seconds_per_gb) is the figure to
# compare across revisions on a loaded machine; MB/s needs an idle one.
set -eu
OUT=${OUT:-docs/perf/2026-12-01-reads3}
DIV=${DIV:-1}
TAILDUR=${DURATION:-10s}
FANDUR=${DURATION:-5s}
mkdir -p "$OUT"
if [ -z "${STRAND:-}" ]; then
	STRAND=$(mktemp -d)/strand
	go build -o "$STRAND" ./cmd/strand
fi
mb() { echo $(($1 / DIV)); }
run() { # name, then the bench flags
	name=$1
	shift
	echo "== $name: strand bench $*" >&2
	"$STRAND" bench "$@" ${EXTRA:-} --json-out "$OUT/$name.json" >"$OUT/$name.txt" 2>&1 || {
		cat "$OUT/$name.txt" >&2
		exit 1
	}
	grep -E 'aggregate|fetched per byte|per GiB read|end-to-end' "$OUT/$name.txt" >&2 || true
	sleep "${PAUSE:-5}" # let the machine reclaim the run's memory before the next
}
W="--producers 4 --record-size 1024"

# catch-up, in-process: one reader of one stream (with the read window's profile)
run catchup-inproc-s1 --workload catchup $W --streams 1 --backlog-mb "$(mb 256)" --cpuprofile-read "$OUT/catchup-inproc-s1.prof"
# catch-up, in-process: 16 streams, one reader each (the aggregate target: every core)
run catchup-inproc-s16 --workload catchup $W --streams 16 --backlog-mb "$(mb 512)"
# catch-up, in-process: 4 streams, one reader each (fewer, larger segments than 16)
run catchup-inproc-s4 --workload catchup $W --streams 4 --backlog-mb "$(mb 512)"
# fan-out: 1, 10 and 100 readers of one stream, tailing and catching up a 64 MB backlog
run fanout-inproc --workload fanout $W --backlog-mb "$(mb 64)" --duration "$FANDUR" --plot "$OUT"
# catch-up through the API on loopback: one reader of one stream (with the read window's profile)
run catchup-api-s1 --api --workload catchup $W --streams 1 --backlog-mb "$(mb 256)" --cpuprofile-read "$OUT/catchup-api-s1.prof"
# tail: 16 streams, one reader each, in-process and through the API
run tail-inproc --workload tail $W --streams 16 --duration "$TAILDUR" --plot "$OUT"
run tail-api --api --workload tail $W --streams 16 --duration "$TAILDUR"
echo "results in $OUT" >&2
