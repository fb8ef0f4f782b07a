#!/bin/sh
# idle36.sh: the default mode (pass index, settle and trim in the window)
# against refs mode (--pass-index=false), in-process, interleaved (issue
# 36, ADR 0072; docs/performance/ingest.md, "Default mode (pass index)
# ingest"). Builds nothing: runs $STRAND (default /tmp/strand; `go build
# -o /tmp/strand ./cmd/strand` first) and prints one markdown table.
#
#   command I, Express: ROUNDS rounds (default 5) of the default mode then
#     refs mode, `strand bench --duration 10s --baseline=false`
#   command I, Standard: SROUNDS rounds (default 2), `--class standard
#     --inflight 128`
#   command A: `--class express --producers 4 --streams 16 --record-size
#     1024 --rate 1,10,100`, once per mode
#
# Each run is 10 s (DUR) after a 1 s warm-up: about 5 minutes in all. Run
# it on an idle machine: the table gives the load average of every run.
# The raw outputs stay in $OUT (default: a new directory under /tmp).
set -eu
STRAND=${STRAND:-/tmp/strand}
ROUNDS=${ROUNDS:-5}
SROUNDS=${SROUNDS:-2}
DUR=${DUR:-10s}
OUT=${OUT:-$(mktemp -d /tmp/idle36.XXXXXX)}
mkdir -p "$OUT"
[ -x "$STRAND" ] || { echo "idle36.sh: no strand binary at $STRAND (go build -o /tmp/strand ./cmd/strand)" >&2; exit 1; }

# run LABEL ARGS...: one bench run, its output in $OUT/LABEL.txt.
run() {
	label=$1
	shift
	echo "idle36.sh: $label" >&2
	if ! "$STRAND" bench --duration "$DUR" --baseline=false "$@" >"$OUT/$label.txt" 2>&1; then
		cat "$OUT/$label.txt" >&2
		echo "idle36.sh: run $label failed" >&2
		exit 1
	fi
}

r=1
while [ "$r" -le "$ROUNDS" ]; do
	run "I-express.default.$r"
	run "I-express.refs.$r" --pass-index=false
	r=$((r + 1))
done
r=1
while [ "$r" -le "$SROUNDS" ]; do
	run "I-standard.default.$r" --class standard --inflight 128
	run "I-standard.refs.$r" --class standard --inflight 128 --pass-index=false
	r=$((r + 1))
done
A="--class express --producers 4 --streams 16 --record-size 1024 --rate 1,10,100"
# shellcheck disable=SC2086 # A is word-split on purpose
run "A.default.1" $A
# shellcheck disable=SC2086
run "A.refs.1" $A --pass-index=false

python3 - "$OUT" <<'EOF'
import os, re, statistics, sys

out = sys.argv[1]
FIELDS = [  # column, pattern (first group), in the order printed
    ("MB/s", r"^  throughput\s+([\d.]+) MB/s"),
    ("ack p50 ms", r"^  ack latency\s+p50\s+([\d.]+)"),
    ("ack p99 ms", r"^  ack latency\s+p50\s+[\d.]+\s+p99\s+([\d.]+)"),
    ("ordered overhead p99 ms", r"^  overhead, ordered floor\s+p50\s+[\d.]+\s+p99\s+([\d.]+)"),
    ("CPU-s/GiB", r"^  CPU\s+[\d.]+ s in the window, ([\d.]+) CPU-s per GiB"),
    ("peak heap MiB", r"^  memory\s+peak heap ([\d.]+) MiB"),
    ("settled MB/s", r"^  settle's pace\s+settled \d+ slots, [\d.]+ MB in the window \(([\d.]+) MB/s\)"),
    ("settle behind MB", r"behind the checkpoint at its end by \d+ slots, ([\d.]+) MB"),
    ("load", r"machine load average ([\d.]+)"),
]

def blocks(text):
    """The report's points: (name, lines) per '== name' block."""
    cur, name = None, None
    for line in text.splitlines():
        if line.startswith("== "):
            if name:
                yield name, cur
            name, cur = line[3:].strip(), []
        elif name:
            cur.append(line)
    if name:
        yield name, cur

def point(name):
    """A run's point without its mode: the rate or max, the class."""
    name = name.removesuffix("-pass-index")
    m = re.search(r"-(\w+?)-p\d+-s\d+-r\d+-(\S+)$", name)
    return f"{m.group(1)} {m.group(2)}" if m else name

rows = []  # (command, mode, round, point, values)
for f in sorted(os.listdir(out)):
    if not f.endswith(".txt"):
        continue
    cmd, mode, rnd = f[:-4].split(".")
    for name, lines in blocks(open(os.path.join(out, f)).read()):
        vals = {}
        for col, pat in FIELDS:
            for line in lines:
                m = re.search(pat, line)
                if m:
                    vals[col] = float(m.group(1))
                    break
        rows.append((cmd.split("-")[0], mode, int(rnd), point(name), vals))
def order(pt):
    """Sorts a point by class, then rate (max last)."""
    cls, _, rate = pt.partition(" ")
    m = re.match(r"([\d.]+)", rate)
    return (cls, float(m.group(1)) if m else float("inf"))
rows.sort(key=lambda r: (r[0] != "I", order(r[3]), r[2], r[1]))

cols = [c for c, _ in FIELDS]
def fmt(v):
    return "" if v is None else (f"{v:,.0f}" if v >= 100 else f"{v:.2f}")
print("| command | point | mode | round | " + " | ".join(cols) + " |")
print("| --- " * (4 + len(cols)) + "|")
for cmd, mode, rnd, pt, vals in rows:
    print(f"| {cmd} | {pt} | {mode} | {rnd} | " + " | ".join(fmt(vals.get(c)) for c in cols) + " |")

print()
print("Medians per point and mode, and the default mode's over refs mode's:")
print()
print("| command | point | mode | runs | " + " | ".join(cols) + " |")
print("| --- " * (4 + len(cols)) + "|")
groups = {}
for cmd, mode, rnd, pt, vals in rows:
    groups.setdefault((cmd, pt, mode), []).append(vals)
for (cmd, pt) in dict.fromkeys((c, p) for c, p, _ in groups):
    med = {}
    for mode in ("default", "refs"):
        runs = groups.get((cmd, pt, mode), [])
        med[mode] = {c: statistics.median([v[c] for v in runs if c in v]) for c in cols if any(c in v for v in runs)}
        print(f"| {cmd} | {pt} | {mode} | {len(runs)} | " + " | ".join(fmt(med[mode].get(c)) for c in cols) + " |")
    ratio = {c: med["default"][c] / med["refs"][c] for c in cols if c in med["default"] and med["refs"].get(c)}
    print(f"| {cmd} | {pt} | default/refs | | " + " | ".join(f"{ratio[c]:.2f}" if c in ratio else "" for c in cols) + " |")
print()
print(f"raw outputs: {out}")
EOF
