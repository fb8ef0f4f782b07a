# shellcheck shell=bash disable=SC2034 # the variables are for the scripts that source this
# Common setup of the localstack/*.sh scripts: paths, resource names,
# helpers. Sourced, not run.

set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
run_dir="$here/.run"

# Every name in strand.env is exported: the star reads them.
set -a
# shellcheck source=localstack/strand.env
. "$here/strand.env"
# The settlement back end's figures, generated from the CDK stack's template.
# shellcheck source=localstack/stack.env
. "$here/stack.env"
set +a

# core.sh up writes the endpoints of LocalStack's core (and of moto's
# DynamoDB beside it) to .run/core.env: while it exists the scripts use
# them, on the host, with no container and no auth token.
load_core_env() {
	if [ -f "$run_dir/core.env" ]; then
		set -a
		# shellcheck source=/dev/null
		. "$run_dir/core.env"
		set +a
	fi
	# LocalStack's edge endpoint, as the host sees it.
	ENDPOINT="${STRAND_LOCALSTACK_ENDPOINT:-http://localhost:4566}"
	# DynamoDB's: the same, or moto's beside LocalStack's core.
	DDB_ENDPOINT="${STRAND_AWS_ENDPOINT_DYNAMODB:-$ENDPOINT}"
}
core_mode() { [ -f "$run_dir/core.env" ]; }
load_core_env
# The star's local addresses.
STAR_ADDR="${STRAND_LOCAL_ADDR:-127.0.0.1:4780}"
STAR_ADMIN_ADDR="${STRAND_LOCAL_ADMIN_ADDR:-127.0.0.1:9090}"

# var NAME prints the value of the variable NAME (stack.env's), or dies.
var() { printf '%s' "${!1:?$1 is not set: localstack/stack.env is incomplete}"; }

say() { printf '== localstack: %s\n' "$*"; }
warn() { printf '!! localstack: %s\n' "$*" >&2; }
die() {
	printf 'localstack: %s\n' "$*" >&2
	exit 1
}

need() { # command hint
	command -v "$1" >/dev/null 2>&1 || die "$1 is not installed: $2"
}

# LocalStack images from 2026.03 on do not start without an auth token (a
# free Hobby account has one): fail here, before docker pulls or starts
# anything, rather than with a container that exits.
require_token() {
	if [ -z "${LOCALSTACK_AUTH_TOKEN:-}" ]; then
		die "LOCALSTACK_AUTH_TOKEN is not set.
  LocalStack needs an auth token since March 2026 (also for its free tier).
  Sign in at https://app.localstack.cloud, copy the token from the Auth Token
  page, then: export LOCALSTACK_AUTH_TOKEN=<token>   (see docs/localstack.md)"
	fi
}

compose() {
	docker compose --project-directory "$here" -f "$here/compose.yaml" "$@"
}

# host_mode: STRAND_AWSLOCAL names an AWS CLI command on this host (for
# example "awslocal", or "aws --endpoint-url http://localhost:4566") to use
# instead of awslocal inside the container.
host_mode() { [ -n "${STRAND_AWSLOCAL:-}" ]; }

# awslocal runs the AWS CLI against LocalStack: inside the container (which
# has awslocal and credentials) unless STRAND_AWSLOCAL says otherwise.
awslocal() {
	if host_mode; then
		local -a cmd
		read -r -a cmd <<<"$STRAND_AWSLOCAL"
		if [ "${1:-}" = dynamodb ] && [ -n "${STRAND_AWS_ENDPOINT_DYNAMODB:-}" ]; then
			cmd=("${cmd[0]}" --endpoint-url "$STRAND_AWS_ENDPOINT_DYNAMODB")
		fi
		AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}" \
			"${cmd[@]}" "$@"
	else
		compose exec -T localstack awslocal "$@"
	fi
}

# run_init_hook runs init/ready.d/10-strand.sh on this host (host mode),
# its awslocal being the function above.
run_init_hook() {
	local shim="$run_dir/bin"
	mkdir -p "$shim"
	printf '#!/usr/bin/env bash\nexec bash -c %s %s "$@"\n' "'. \"\$0\"; awslocal \"\$@\"'" "$here/lib.sh" >"$shim/awslocal"
	chmod +x "$shim/awslocal"
	PATH="$shim:$PATH" STRAND_ENV_FILE="$here/strand.env" AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" \
		AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}" "$here/init/ready.d/10-strand.sh"
}

# wait_http url seconds: until url answers 2xx.
wait_http() {
	local url="$1" secs="$2" i
	for ((i = 0; i < secs * 4; i++)); do
		if curl -fsS -o /dev/null "$url" 2>/dev/null; then
			return 0
		fi
		sleep 0.25
	done
	return 1
}

# proc_pid name prints the pid of the process deploy.sh started as
# .run/name (the star, the poller), if it still runs.
proc_pid() {
	local pid
	[ -f "$run_dir/$1.pid" ] || return 1
	pid="$(cat "$run_dir/$1.pid")"
	# Only our binary: the pid file may be stale and the pid reused.
	if kill -0 "$pid" 2>/dev/null && [ "$(ps -o comm= -p "$pid" 2>/dev/null)" = "$1" ]; then
		echo "$pid"
		return 0
	fi
	return 1
}

stop_pid() { # name
	local pid i
	if pid="$(proc_pid "$1")"; then
		say "stopping the $1 (pid $pid)"
		kill -TERM "$pid"
		for ((i = 0; i < 40; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.25
		done
		if kill -0 "$pid" 2>/dev/null; then
			warn "the $1 did not stop in 10 s; sending SIGKILL"
			kill -KILL "$pid"
		fi
	fi
	rm -f "$run_dir/$1.pid"
}

stop_star() { stop_pid star; }
