#!/usr/bin/env bash
# Stop the star deploy.sh started and remove the LocalStack container (its
# state goes with it: LocalStack keeps nothing between runs by default).
# shellcheck source=localstack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

stop_star
stop_pid poller
if host_mode; then
	say "STRAND_AWSLOCAL is set: not touching any container"
	exit 0
fi
need docker "https://docs.docker.com/engine/install/"
# compose interpolates the whole file, token included, even to stop it;
# stopping needs no valid token.
LOCALSTACK_AUTH_TOKEN="${LOCALSTACK_AUTH_TOKEN:-not-needed-to-stop}" compose down --volumes --remove-orphans
rm -rf "$run_dir"
say "stopped"
