#!/usr/bin/env bash
# Measures ack and end-to-end latency at 0.5 MB/s from the schedule, then
# writes 1 GiB (MB=1024) and reads it back, on NATS JetStream 2.15.2 (file store, sync
# on every write) and on strand dev, side by side, interleaved; see
# main.go for how the setups differ. Usage: bench/peer/nats/run.sh
# [natspeer flags], e.g. -mb 256 -rounds 2 -json-out peer.json
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd "$root" && go build -o "$bin/strand" ./cmd/strand)
GOBIN="$bin" go install github.com/nats-io/nats-server/v2@v2.15.2
(cd "$here" && go build -o "$bin/natspeer" .)
"$bin/natspeer" -strand "$bin/strand" -nats-server "$bin/nats-server" "$@"
