#!/usr/bin/env bash
# LocalStack's open-source core without Docker (docs/localstack.md, "The
# core from PyPI"): localstack-core from PyPI, pinned with everything it
# imports in requirements.txt, in a virtual environment (.venv), run in
# host mode on loopback; beside it moto's DynamoDB (LocalStack's core serves
# DynamoDB only through DynamoDB Local, which it downloads with a Java
# runtime at first use: not taken here).
#   ./core.sh up     install if needed, start both, run the init hook,
#                    write .run/core.env (the endpoints) and print it
#   ./core.sh down   stop both
#   ./core.sh env    print .run/core.env (source it: . <(./core.sh env))
# The other scripts (deploy.sh, test.sh, check.sh) read .run/core.env when
# it exists, and then need no Docker and no auth token.
# shellcheck source=localstack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

venv="${STRAND_LOCALSTACK_VENV:-$here/.venv}"
port="${STRAND_LOCALSTACK_PORT:-4566}"

# python_for_core prints a python 3.12+ (localstack-core 2026.3.0's code
# needs it, its metadata notwithstanding).
python_for_core() {
	local py pyenv_root
	pyenv_root="$(pyenv root 2>/dev/null || true)"
	# pyenv's shims exist for every installed version but run only the
	# selected one: try its installs directly too.
	for py in "${STRAND_LOCALSTACK_PYTHON:-}" python3.13 python3.12 python3 \
		${pyenv_root:+"$pyenv_root"/versions/3.13*/bin/python3 "$pyenv_root"/versions/3.12*/bin/python3}; do
		[ -n "$py" ] || continue
		command -v "$py" >/dev/null 2>&1 || continue
		if "$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then
			command -v "$py"
			return 0
		fi
	done
	return 1
}

install_core() {
	local stamp="$venv/.strand-requirements" py
	if [ -x "$venv/bin/python" ] && cmp -s "$stamp" "$here/requirements.txt"; then
		return 0
	fi
	py="$(python_for_core)" || die "LocalStack's core needs python 3.12 or later (python3.12/python3.13 on PATH, or STRAND_LOCALSTACK_PYTHON)"
	say "installing localstack-core into $venv with $py (requirements.txt; a few minutes the first time)"
	rm -rf "$venv"
	"$py" -m venv "$venv"
	"$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt"
	cp "$here/requirements.txt" "$stamp"
}

# start_group log pidfile cmd...: cmd in its own session (so down kills its
# whole process group), output to log.
start_group() {
	local log="$1" pidfile="$2"
	shift 2
	setsid "$@" >"$log" 2>&1 </dev/null &
	echo $! >"$pidfile"
}

stop_group() { # pidfile name
	local pid i
	[ -f "$1" ] || return 0
	pid="$(cat "$1")"
	if kill -0 "$pid" 2>/dev/null; then
		say "stopping $2 (pid $pid)"
		kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < 40; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.25
		done
		kill -KILL -- "-$pid" 2>/dev/null || true
	fi
	rm -f "$1"
}

up() {
	need curl "apt-get install curl"
	need python3 "moto's DynamoDB runs on the system python3 with moto[server] (pip install 'moto[server]==5.*')"
	python3 -c 'import moto.server, werkzeug' 2>/dev/null ||
		die "python3 cannot import moto.server: pip install 'moto[server]==5.*' (moto's DynamoDB runs beside LocalStack's core)"
	install_core
	mkdir -p "$run_dir"
	if [ -f "$run_dir/core.env" ] && curl -fsS -o /dev/null "http://127.0.0.1:$port/_localstack/health" 2>/dev/null; then
		say "already running: $run_dir/core.env"
		cat "$run_dir/core.env"
		return 0
	fi
	down_quiet
	say "starting LocalStack's core $(grep '^localstack-core==' "$here/requirements.txt" | cut -d= -f3) on 127.0.0.1:$port (log .run/localstack.log)"
	# Host mode: no Docker. DNS_ADDRESS=0: no DNS server (it would want
	# port 53). The state lives under .run/ and goes with down.
	start_group "$run_dir/localstack.log" "$run_dir/localstack.pid" env \
		GATEWAY_LISTEN="127.0.0.1:$port" LOCALSTACK_HOST="127.0.0.1:$port" SQS_ENDPOINT_STRATEGY=path \
		FILESYSTEM_ROOT="$run_dir/localstack-fs" DNS_ADDRESS=0 DISABLE_EVENTS=1 SKIP_SSL_CERT_DOWNLOAD=1 \
		AWS_DEFAULT_REGION="$AWS_DEFAULT_REGION" DEBUG="${LOCALSTACK_DEBUG:-0}" \
		"$venv/bin/python" -m localstack.runtime.main
	say "starting moto's DynamoDB (shared/emulator/moto_server.py: one request at a time) (log .run/moto.log)"
	# The script exits when its stdin ends: keep it open with a sleeper in
	# the same process group.
	start_group "$run_dir/moto.log" "$run_dir/moto.pid" bash -c \
		'sleep 2147483647 | exec python3 "$0" 127.0.0.1' "$root/shared/emulator/moto_server.py"
	local moto_port="" i
	for ((i = 0; i < 240; i++)); do
		moto_port="$(sed -n 's/^PORT //p' "$run_dir/moto.log" 2>/dev/null | head -n1)"
		[ -n "$moto_port" ] && break
		sleep 0.25
	done
	[ -n "$moto_port" ] || {
		tail -n 20 "$run_dir/moto.log" >&2
		die "moto did not start (log above)"
	}
	if ! wait_http "http://127.0.0.1:$port/_localstack/health" 120; then
		tail -n 40 "$run_dir/localstack.log" >&2
		die "LocalStack's core did not answer on 127.0.0.1:$port in 120 s (log above)"
	fi
	wait_http "http://127.0.0.1:$moto_port/moto-api/" 30 || die "moto does not answer on 127.0.0.1:$moto_port"
	cat >"$run_dir/core.env" <<-EOF
		STRAND_LOCALSTACK_ENDPOINT=http://127.0.0.1:$port
		STRAND_AWS_ENDPOINT=http://127.0.0.1:$port
		STRAND_AWS_ENDPOINT_DYNAMODB=http://127.0.0.1:$moto_port
		STRAND_AWSLOCAL="$venv/bin/aws --endpoint-url http://127.0.0.1:$port"
	EOF
	# The init hook, on the host: the same awslocal routing as the scripts.
	load_core_env
	say "buckets, table and queues (init/ready.d/10-strand.sh)"
	run_init_hook
	say "LocalStack's core on http://127.0.0.1:$port, DynamoDB (moto) on http://127.0.0.1:$moto_port; .run/core.env:"
	cat "$run_dir/core.env"
}

down_quiet() {
	stop_group "$run_dir/localstack.pid" "LocalStack's core"
	stop_group "$run_dir/moto.pid" "moto"
}

case "${1:-}" in
up) up ;;
down)
	stop_star
	stop_pid poller
	down_quiet
	rm -rf "$run_dir/core.env" "$run_dir/localstack-fs"
	say "stopped"
	;;
env) cat "$run_dir/core.env" ;;
*) die "usage: $0 up|down|env" ;;
esac
