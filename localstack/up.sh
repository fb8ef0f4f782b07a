#!/usr/bin/env bash
# Start LocalStack (compose.yaml) and wait until it is healthy: the gateway
# answers and the init hook (init/ready.d/10-strand.sh) created strand's
# buckets, table and queues. Next: ./deploy.sh.
# shellcheck source=localstack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_token
need docker "https://docs.docker.com/engine/install/ (with the compose plugin)"
need curl "apt-get install curl"
docker compose version >/dev/null 2>&1 || die "docker compose (v2 plugin) is not available"
docker info >/dev/null 2>&1 || die "no Docker engine answers (is dockerd running, and may this user use it?)"

mkdir -p "$here/build" "$run_dir"
say "starting LocalStack (pulls the pinned image on first use)"
if ! compose up -d --wait --wait-timeout 180; then
	compose logs --tail 80 localstack >&2 || true
	die "LocalStack did not become healthy (logs above). An invalid auth token shows there as a licensing error."
fi
wait_http "$ENDPOINT/_localstack/health" 30 || die "LocalStack is up but $ENDPOINT does not answer from this host"
curl -fsS "$ENDPOINT/_localstack/init/ready" | grep -q '"completed": *true' ||
	die "the init hook did not complete: curl $ENDPOINT/_localstack/init shows its state"
say "LocalStack is healthy at $ENDPOINT; next: $here/deploy.sh"
