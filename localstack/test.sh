#!/usr/bin/env bash
# Run the integration suite (tests/integration) against LocalStack: it
# builds functions/star, starts it against $ENDPOINT with its own uniquely
# named buckets, table and queues, and drives it through the client.
# Extra arguments go to `go test` (default: ./tests/integration/).
#   ./test.sh                          # the integration suite
#   ./test.sh ./tests/ -run Pipeline   # the pipeline test too
# shellcheck source=localstack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

host_mode || require_token
need go "https://go.dev/dl/ (the version in go.mod)"
need curl "apt-get install curl"
host_mode || wait_http "$ENDPOINT/_localstack/health" 5 || die "LocalStack does not answer at $ENDPOINT: run $here/up.sh first"

args=("$@")
[ ${#args[@]} -gt 0 ] || args=(./tests/integration/)
say "go test ${args[*]} against $ENDPOINT"
cd "$root"
STRAND_AWS_ENDPOINT="$ENDPOINT" AWS_REGION="$AWS_DEFAULT_REGION" go test -count=1 -timeout 10m -v "${args[@]}"
