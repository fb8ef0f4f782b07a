# Sourced by run.sh and sidebyside.sh: a work directory removed on exit
# with the processes started (pids), the Maven jars, free ports, and
# strand dev with its Kafka front end.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
command -v java >/dev/null || { echo "java (17) is required" >&2; exit 1; }
command -v mvn >/dev/null || { echo "mvn is required to fetch the Kafka jars (apt-get install maven)" >&2; exit 1; }

# jars DIR: the jars of DIR/pom.xml in DIR/target/lib, fetched once.
jars() { [ -d "$1/target/lib" ] || (cd "$1" && mvn -q -B dependency:copy-dependencies -DoutputDirectory=target/lib); }
free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_strand: builds strand and runs strand dev; its Kafka address is $SB.
start_strand() {
  (cd "$root" && go build -o "$work/strand" ./cmd/strand)
  SB="127.0.0.1:$(free)"
  "$work/strand" dev --data-dir "$work/strand-data" --addr "127.0.0.1:$(free)" --kafka-addr "$SB" --log-level warn >"$work/dev.out" 2>"$work/dev.err" &
  pids+=($!)
  for _ in $(seq 100); do grep -q "bootstrap server" "$work/dev.out" 2>/dev/null && break; sleep 0.1; done
  grep -q "bootstrap server $SB" "$work/dev.out" || { cat "$work/dev.out" "$work/dev.err"; echo "strand dev did not start" >&2; exit 1; }
}
