#!/usr/bin/env bash
# `make localstack-test`: the whole LocalStack suite on LocalStack's
# open-source core, without Docker or an auth token (docs/localstack.md):
#   1. core.sh up: localstack-core from requirements.txt in .venv (a few
#      minutes the first time), moto's DynamoDB beside it, the init hook;
#   2. test.sh: the integration suite and the AWS conformance suites
#      against it (S3 and SQS: LocalStack; DynamoDB: moto);
#   3. deploy.sh: the Lambdas' configuration, the sweep rules, the poller
#      and the star; check.sh: queues, Lambdas and schedules against
#      stack.env, then a stream absorbed and settled by the real handlers
#      from LocalStack's queues and schedule;
#   4. cfn.sh: the synthesized template on LocalStack's CloudFormation;
#   5. core.sh down (also on failure), unless STRAND_LOCALSTACK_KEEP=1.
# Ports: STRAND_LOCALSTACK_PORT (4566), STRAND_LOCAL_ADDR (127.0.0.1:4780),
# STRAND_LOCAL_ADMIN_ADDR (127.0.0.1:9090).
# shellcheck source=localstack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

start=$SECONDS
finish() {
	local rc=$?
	if [ "${STRAND_LOCALSTACK_KEEP:-0}" != "1" ]; then
		"$here/down.sh" >/dev/null 2>&1 || true
		"$here/core.sh" down >/dev/null 2>&1 || true
	fi
	if [ "$rc" = 0 ]; then
		say "suite passed in $((SECONDS - start)) s"
	else
		warn "suite FAILED (exit $rc) after $((SECONDS - start)) s; logs in $run_dir"
	fi
}
trap finish EXIT

step() { say "---- $*"; }

step "1/4 LocalStack's core"
"$here/core.sh" up
load_core_env

step "2/4 the integration and conformance suites"
"$here/test.sh" ./tests/integration/ ./shared/emulator/ ./shared/objstore/s3obj/ ./shared/metastore/dynamo/ \
	./shared/lambdaenv/ ./localstack/token/ >"$run_dir/go-test.log" 2>&1 || {
	grep -E '^(--- FAIL|FAIL|panic)' "$run_dir/go-test.log" >&2 || tail -n 40 "$run_dir/go-test.log" >&2
	die "go test failed against LocalStack's core (log: .run/go-test.log)"
}
grep -E '^(ok|FAIL)' "$run_dir/go-test.log"
"$here/test.sh" ./tests/ -run 'TestPipelineOnEmulator$' >"$run_dir/go-test-pipeline.log" 2>&1 || {
	tail -n 40 "$run_dir/go-test-pipeline.log" >&2
	die "the pipeline test failed against LocalStack's core (log: .run/go-test-pipeline.log)"
}
grep -E '^(ok|FAIL)' "$run_dir/go-test-pipeline.log"

step "3/4 deploy, check against the stack, settle end to end"
"$here/deploy.sh"
STRAND_CHECK_SETTLE=1 "$here/check.sh"

step "4/4 the synthesized template on LocalStack's CloudFormation"
"$here/cfn.sh"
