#!/usr/bin/env bash
# Check a deployment (after deploy.sh) against localstack/stack.env, the
# description generated from the CDK stack's template:
#   1. each queue's retention, visibility timeout and redrive;
#   2. each Lambda's memory, timeout and environment (every literal value of
#      the stack: STRAND_PASS_INDEX, GOMEMLIMIT, STRAND_WINDOW_CACHE_MIB ...);
#   3. each sweep rule's schedule;
#   4. with STRAND_CHECK_SETTLE=1 (core mode: the poller runs the Lambdas),
#      end to end: a stream appended through the star is absorbed from the
#      release queue and swept by settle from LocalStack's schedule, and
#      reads back the same.
# Exits non-zero on the first difference, saying what differs.
# shellcheck source=localstack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

host_mode || require_token
need curl "apt-get install curl"
fail() { die "check: $*"; }

# 1. Queues.
queue_attr() { # queue attribute
	local url
	url="$(awslocal sqs get-queue-url --queue-name "$1" --query QueueUrl --output text)"
	awslocal sqs get-queue-attributes --queue-url "$url" --attribute-names All --query "Attributes.$2" --output text
}
check_queue() { # queue ROLE(stack.env prefix)
	local got want k
	for k in RETENTION_SECONDS:MessageRetentionPeriod VISIBILITY_SECONDS:VisibilityTimeout; do
		want="$(eval "printf '%s' \"\${STRAND_$2_${k%%:*}:-}\"")"
		[ -n "$want" ] || continue
		got="$(queue_attr "$1" "${k#*:}")"
		[ "$got" = "$want" ] || fail "queue $1: ${k#*:} $got, the stack's $want"
	done
	want="$(eval "printf '%s' \"\${STRAND_$2_MAX_RECEIVES:-}\"")"
	if [ -n "$want" ]; then
		got="$(queue_attr "$1" RedrivePolicy)"
		grep -Eq "\"maxReceiveCount\": *\"?$want\"?[,}]" <<<"$got" || fail "queue $1: redrive $got, the stack's maxReceiveCount $want"
	fi
	say "queue $1: as the stack"
}
check_queue "$STRAND_RELEASE_QUEUE" RELEASE
check_queue "$STRAND_RELEASE_DLQ" RELEASE_DLQ
check_queue "$STRAND_FENCE_QUEUE" FENCE
check_queue "$STRAND_FENCE_DLQ" FENCE_DLQ

# 2, 3. Lambdas and their sweeps.
if [ "${STRAND_LOCALSTACK_LAMBDAS:-1}" != "0" ]; then
	for name in absorb settle trim probe; do
		up="$(tr '[:lower:]' '[:upper:]' <<<"$name")"
		fn="strand-$name"
		conf="$(awslocal lambda get-function-configuration --function-name "$fn" --output json)"
		got="$(awslocal lambda get-function-configuration --function-name "$fn" --query '[MemorySize,Timeout]' --output text)"
		want="$(var "STRAND_${up}_MEMORY_MIB")	$(var "STRAND_${up}_TIMEOUT_SECONDS")"
		[ "$got" = "$want" ] || fail "Lambda $fn: memory and timeout $got, the stack's $want"
		for kv in $(var "STRAND_${up}_ENV"); do
			grep -Fq "\"${kv%%=*}\": \"${kv#*=}\"" <<<"$conf" || fail "Lambda $fn: no ${kv%%=*}=${kv#*=} in its environment"
		done
		got="$(awslocal events describe-rule --name "strand-$name-sweep" --query ScheduleExpression --output text)"
		want="$(var "STRAND_${up}_SWEEP")"
		[ "$got" = "$want" ] || fail "rule strand-$name-sweep: $got, the stack's $want"
		say "Lambda $fn and its sweep: as the stack"
	done
fi

# 4. End to end, through the poller.
if [ "${STRAND_CHECK_SETTLE:-0}" = "1" ]; then
	[ -f "$run_dir/token" ] || fail "no token: run deploy.sh first"
	export STRAND_ENDPOINT="http://$STAR_ADDR" STRAND_TOKEN
	STRAND_TOKEN="$(cat "$run_dir/token")"
	cli="$run_dir/strand"
	(cd "$root" && go build -o "$cli" ./cmd/strand)
	stream="check-$(date +%s)-$RANDOM"
	"$cli" create "$stream" --class express >/dev/null
	for i in 1 2 3; do printf 'record %s\n' "$i" | "$cli" append "$stream" >/dev/null; done
	want="$(printf 'record %s\n' 1 2 3)"
	[ "$("$cli" read "$stream")" = "$want" ] || fail "$stream does not read back what was appended"
	say "appended 3 records to $stream; waiting for absorb (release queue) and a settle sweep (schedule, up to 150 s)"
	mark="$(wc -l <"$run_dir/poller.log")"
	for ((i = 0; i < 150; i++)); do
		new="$(tail -n +"$((mark + 1))" "$run_dir/poller.log")"
		if grep -q '"msg":"batch".*"function":"absorb"' <<<"$new" && grep -q '"msg":"sweep".*"function":"settle"' <<<"$new"; then
			break
		fi
		sleep 1
	done
	grep -q '"msg":"batch".*"function":"absorb"' <<<"$new" || fail "no absorb batch in 150 s (.run/poller.log)"
	grep -q '"msg":"sweep".*"function":"settle"' <<<"$new" || fail "no settle sweep in 150 s (.run/poller.log)"
	if grep -q '"msg":"\(invocation failed\|sweep failed\)' <<<"$new"; then
		fail "a function failed: $(grep '"msg":"\(invocation failed\|sweep failed\)' <<<"$new" | head -n 3)"
	fi
	[ "$("$cli" read "$stream")" = "$want" ] || fail "$stream reads differently after absorb and settle"
	n="$(awslocal s3api list-objects-v2 --bucket "$STRAND_SETTLED_BUCKET" --query 'length(Contents)' --output text)"
	[ "$n" != "None" ] && [ "$n" -gt 0 ] || fail "nothing in $STRAND_SETTLED_BUCKET after a settle sweep"
	say "absorbed and settled by the real handlers ($n objects in $STRAND_SETTLED_BUCKET); $stream reads the same"
fi
say "check passed"
