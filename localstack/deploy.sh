#!/usr/bin/env bash
# Deploy strand to LocalStack, as far as its free tier allows (see
# docs/localstack.md):
#   1. the buckets (the Express set as three general-purpose buckets), the
#      table and the queues: the init hook again (idempotent);
#   2. the settlement Lambdas absorb, settle, trim and probe from
#      functions/<name>, built for the Docker host's CPU, with the SQS
#      triggers (release -> absorb, fence -> probe) and sweep schedules
#      (skip with STRAND_LOCALSTACK_LAMBDAS=0);
#   3. the star as a process on this host (functions/star; LocalStack's free
#      tier has no ECS) against $ENDPOINT, configured by the same STRAND_*
#      environment as the ECS task, then waits for /healthz;
#   4. an admin bearer token in the table (kept in .run/token).
# Run ./up.sh first. Re-running redeploys (the star is restarted: a takeover).
# shellcheck source=localstack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

host_mode || require_token
need go "https://go.dev/dl/ (the version in go.mod)"
need curl "apt-get install curl"
host_mode || wait_http "$ENDPOINT/_localstack/health" 5 || die "LocalStack does not answer at $ENDPOINT: run $here/up.sh first"
mkdir -p "$run_dir" "$here/build"

# 1. Buckets, table, queues.
say "buckets, table and queues (init/ready.d/10-strand.sh)"
if host_mode; then
	run_init_hook
else
	compose exec -T localstack bash /etc/localstack/init/ready.d/10-strand.sh
fi
queue_url() { awslocal sqs get-queue-url --queue-name "$1" --query QueueUrl --output text; }
queue_arn() { awslocal sqs get-queue-attributes --queue-url "$1" --attribute-names QueueArn --query Attributes.QueueArn --output text; }
release_url="$(queue_url "$STRAND_RELEASE_QUEUE")"
fence_url="$(queue_url "$STRAND_FENCE_QUEUE")"

# 2. Lambdas.
# lambda_env "K=V ...": the Lambda environment JSON, the stack's names
# mapped to strand.env's resources, plus the stack's literal values
# (STRAND_PASS_INDEX, GOMEMLIMIT, STRAND_WINDOW_CACHE_MIB, ...).
# LocalStack points the SDK at itself inside a Lambda (AWS_ENDPOINT_URL);
# S3 goes path-style.
lambda_env() {
	local out kv
	out="$(printf '"STRAND_TABLE":"%s","STRAND_EXPRESS_BUCKETS":"%s","STRAND_STANDARD_BUCKET":"%s","STRAND_SETTLED_BUCKET":"%s","STRAND_S3_PATH_STYLE":"true"' \
		"$STRAND_TABLE" "$STRAND_EXPRESS_BUCKETS" "$STRAND_STANDARD_BUCKET" "$STRAND_SETTLED_BUCKET")"
	for kv in $1; do
		out="$out,$(printf '"%s":"%s"' "${kv%%=*}" "${kv#*=}")"
	done
	printf '{"Variables":{%s}}' "$out"
}
deploy_lambdas() {
	local arch goarch zipdir fn name up mem timeout env_json role_arn
	# Build for the CPU of the engine that runs the Lambda containers, so
	# that no emulation is needed (infra/build holds arm64 builds for AWS).
	local engine_arch
	engine_arch="$(uname -m)"
	if ! host_mode; then
		engine_arch="$(docker info --format '{{.Architecture}}' 2>/dev/null)" || engine_arch="$(uname -m)"
	fi
	case "${STRAND_LAMBDA_ARCH:-$engine_arch}" in
	x86_64 | amd64) arch=x86_64 goarch=amd64 ;;
	aarch64 | arm64) arch=arm64 goarch=arm64 ;;
	*) die "unknown CPU architecture for the Lambdas: set STRAND_LAMBDA_ARCH to x86_64 or arm64" ;;
	esac
	zipdir=/etc/strand/build # inside the container (compose.yaml mounts ./build there)
	host_mode && zipdir="$here/build"
	for name in absorb settle trim probe; do
		say "build functions/$name -> build/$name.zip (linux/$goarch)"
		rm -rf "${here:?}/build/$name" "$here/build/$name.zip"
		mkdir -p "$here/build/$name"
		(cd "$root" && CGO_ENABLED=0 GOOS=linux GOARCH="$goarch" go build -tags lambda.norpc -trimpath -ldflags='-s -w' \
			-o "$here/build/$name/bootstrap" "./functions/$name")
		if command -v zip >/dev/null 2>&1; then
			(cd "$here/build/$name" && zip -q -X "../$name.zip" bootstrap)
		else
			need python3 "install zip or python3 to package the Lambdas"
			(cd "$here/build/$name" && python3 -m zipfile -c "../$name.zip" bootstrap)
		fi
	done
	# LocalStack does not enforce IAM by default; the role exists so that
	# the calls are the ones AWS takes. Least privilege is asserted on the
	# CDK template instead (infra/stack tests).
	if ! role_arn="$(awslocal iam get-role --role-name strand-lambda --query Role.Arn --output text 2>/dev/null)"; then
		role_arn="$(awslocal iam create-role --role-name strand-lambda --query Role.Arn --output text \
			--assume-role-policy-document '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"lambda.amazonaws.com"},"Action":"sts:AssumeRole"}]}')"
	fi
	# name -> memory (MB), timeout (s), environment: all from stack.env,
	# generated from the stack's template.
	for name in absorb settle trim probe; do
		up="$(tr '[:lower:]' '[:upper:]' <<<"$name")"
		mem="$(var "STRAND_${up}_MEMORY_MIB")"
		timeout="$(var "STRAND_${up}_TIMEOUT_SECONDS")"
		env_json="$(lambda_env "$(var "STRAND_${up}_ENV")")"
		fn="strand-$name"
		if core_mode; then
			# LocalStack's core cannot run a Lambda (no Docker; and it
			# fails to fetch its runtime: "Installation of lambda-runtime
			# ... failed"), so the function stays Failed: it is created for
			# its configuration (check.sh compares it with stack.env), and
			# the poller runs its bootstrap.
			# Such a function can be neither updated nor deleted there
			# ("cannot be updated if an old one is not running"; "Unable
			# to find version manager"): a changed configuration needs a
			# fresh core (core.sh down; core.sh up).
			if awslocal lambda get-function --function-name "$fn" >/dev/null 2>&1; then
				say "Lambda $fn exists (configuration only; the poller runs the new build)"
				continue
			fi
			say "create Lambda $fn (configuration only: the poller runs it)"
			awslocal lambda create-function --function-name "$fn" --runtime provided.al2023 --handler bootstrap \
				--architectures "$arch" --role "$role_arn" --memory-size "$mem" --timeout "$timeout" \
				--zip-file "fileb://$zipdir/$name.zip" --environment "$env_json" >/dev/null
		elif awslocal lambda get-function --function-name "$fn" >/dev/null 2>&1; then
			say "update Lambda $fn"
			awslocal lambda update-function-code --function-name "$fn" --architectures "$arch" \
				--zip-file "fileb://$zipdir/$name.zip" >/dev/null
			awslocal lambda wait function-updated-v2 --function-name "$fn"
			awslocal lambda update-function-configuration --function-name "$fn" --memory-size "$mem" --timeout "$timeout" \
				--environment "$env_json" >/dev/null
			awslocal lambda wait function-updated-v2 --function-name "$fn"
		else
			say "create Lambda $fn"
			awslocal lambda create-function --function-name "$fn" --runtime provided.al2023 --handler bootstrap \
				--architectures "$arch" --role "$role_arn" --memory-size "$mem" --timeout "$timeout" \
				--zip-file "fileb://$zipdir/$name.zip" --environment "$env_json" >/dev/null
			awslocal lambda wait function-active-v2 --function-name "$fn"
		fi
	done
	# SQS triggers with partial-batch responses.
	trigger() { # function queue-url
		local arn n
		arn="$(queue_arn "$2")"
		n="$(awslocal lambda list-event-source-mappings --function-name "$1" --event-source-arn "$arn" \
			--query 'length(EventSourceMappings)' --output text)"
		if [ "$n" = "0" ]; then
			awslocal lambda create-event-source-mapping --function-name "$1" --event-source-arn "$arn" \
				--batch-size 10 --function-response-types ReportBatchItemFailures >/dev/null
			say "trigger $2 -> $1"
		fi
	}
	# In core mode the poller is the trigger: a mapping would have
	# LocalStack take the messages for a Lambda it cannot run.
	if ! core_mode; then
		trigger strand-absorb "$release_url"
		trigger strand-probe "$fence_url"
	fi
	# Sweeps: the scheduled event itself is the input (its detail-type is
	# what the handlers accept), at the stack's rates.
	sweep() { # name rate
		local rule="strand-$1-sweep" rule_arn fn_arn
		rule_arn="$(awslocal events put-rule --name "$rule" --schedule-expression "$2" --query RuleArn --output text)"
		if core_mode; then # to the poller, through the sweep queue
			awslocal events put-targets --rule "$rule" --targets "Id=strand-$1,Arn=$sweep_arn" >/dev/null
			say "sweep strand-$1 $2 (to $STRAND_SWEEP_QUEUE)"
			return
		fi
		fn_arn="$(awslocal lambda get-function --function-name "strand-$1" --query Configuration.FunctionArn --output text)"
		awslocal lambda add-permission --function-name "strand-$1" --statement-id "$rule" --action lambda:InvokeFunction \
			--principal events.amazonaws.com --source-arn "$rule_arn" >/dev/null 2>&1 || true # present on a redeploy
		awslocal events put-targets --rule "$rule" --targets "Id=strand-$1,Arn=$fn_arn" >/dev/null
		say "sweep strand-$1 $2"
	}
	if core_mode; then
		sweep_url="$(awslocal sqs create-queue --queue-name "$STRAND_SWEEP_QUEUE" --query QueueUrl --output text)"
		sweep_arn="$(queue_arn "$sweep_url")"
	fi
	for name in absorb settle trim probe; do
		sweep "$name" "$(var "STRAND_$(tr '[:lower:]' '[:upper:]' <<<"$name")_SWEEP")"
	done
}
if [ "${STRAND_LOCALSTACK_LAMBDAS:-1}" = "0" ]; then
	warn "STRAND_LOCALSTACK_LAMBDAS=0: no Lambdas; nothing absorbs the release queue, and the star's backlog fills"
else
	host_mode || need docker "https://docs.docker.com/engine/install/"
	deploy_lambdas
fi

# 3. In core mode, the poller: it runs the Lambdas' bootstraps and
# delivers them their queues' and schedules' events (localstack/poller).
stop_pid poller
if core_mode && [ "${STRAND_LOCALSTACK_LAMBDAS:-1}" != "0" ]; then
	say "build localstack/poller -> .run/poller; start it (log .run/poller.log)"
	(cd "$root" && go build -o "$run_dir/poller" ./localstack/poller)
	AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}" \
		nohup "$run_dir/poller" --bootstrap-dir "$here/build" --endpoint "$ENDPOINT" --dynamodb-endpoint "$DDB_ENDPOINT" \
		--region "$AWS_DEFAULT_REGION" --release-queue-url "$release_url" --fence-queue-url "$fence_url" \
		--sweep-queue-url "$sweep_url" >"$run_dir/poller.log" 2>&1 &
	echo $! >"$run_dir/poller.pid"
fi

# 4. The star, as a process on this host (what the ECS task runs).
stop_star
say "build functions/star -> .run/star"
(cd "$root" && go build -o "$run_dir/star" ./functions/star)
say "start the star on $STAR_ADDR (admin $STAR_ADMIN_ADDR), log in .run/star.log"
AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}" \
	AWS_REGION="$AWS_DEFAULT_REGION" \
	STRAND_RELEASE_QUEUE_URL="$release_url" STRAND_FENCE_QUEUE_URL="$fence_url" \
	STRAND_ADDR="$STAR_ADDR" STRAND_ADMIN_ADDR="$STAR_ADMIN_ADDR" \
	nohup "$run_dir/star" --aws-endpoint "$ENDPOINT" --dynamodb-endpoint "$DDB_ENDPOINT" --s3-path-style --create-table \
	--region "$AWS_DEFAULT_REGION" >"$run_dir/star.log" 2>&1 &
echo $! >"$run_dir/star.pid"
if ! wait_http "http://$STAR_ADMIN_ADDR/healthz" 60; then
	tail -n 40 "$run_dir/star.log" >&2 || true
	stop_star
	die "the star did not become healthy in 60 s (log above, full log in $run_dir/star.log)"
fi

# 5. A token.
token="$(cd "$root" && AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}" \
	go run ./localstack/token --endpoint "$DDB_ENDPOINT" --region "$AWS_DEFAULT_REGION" --table "$STRAND_TABLE" \
	--token-file "$run_dir/token")"
say "deployed. The star serves on http://$STAR_ADDR:

  export STRAND_ENDPOINT=http://$STAR_ADDR STRAND_TOKEN=$token
  go run ./cmd/strand create demo --class express && echo hi | go run ./cmd/strand append demo

Logs: $run_dir/star.log. Stop everything: $here/down.sh"
