#!/bin/bash
# LocalStack init hook (ready.d): creates strand's buckets, table and queues
# as the CDK stack does (infra/stack), mapped to what LocalStack offers: the
# Express set is three general-purpose buckets. Idempotent: deploy.sh runs
# it again (docker compose exec) to make sure everything exists.
set -euo pipefail

export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
env_file="${STRAND_ENV_FILE:-/etc/strand/strand.env}"
# shellcheck source=SCRIPTDIR/../../strand.env
. "$env_file"
# The queues' attributes, as the CDK stack sets them (generated from its
# template, beside strand.env: see its header).
# shellcheck source=SCRIPTDIR/../../stack.env
. "$(dirname "$env_file")/stack.env"
export AWS_DEFAULT_REGION

# Buckets: the Express set, the Standard chain bucket, the settled bucket.
IFS=, read -r -a express <<<"$STRAND_EXPRESS_BUCKETS"
for b in "${express[@]}" "$STRAND_STANDARD_BUCKET" "$STRAND_SETTLED_BUCKET"; do
	if awslocal s3api head-bucket --bucket "$b" >/dev/null 2>&1; then
		echo "strand: bucket $b exists"
	else
		awslocal s3api create-bucket --bucket "$b" >/dev/null
		echo "strand: bucket $b created"
	fi
done

# The metastore table: PK/SK strings, on demand.
if awslocal dynamodb describe-table --table-name "$STRAND_TABLE" >/dev/null 2>&1; then
	echo "strand: table $STRAND_TABLE exists"
else
	awslocal dynamodb create-table --table-name "$STRAND_TABLE" --billing-mode PAY_PER_REQUEST \
		--attribute-definitions AttributeName=PK,AttributeType=S AttributeName=SK,AttributeType=S \
		--key-schema AttributeName=PK,KeyType=HASH AttributeName=SK,KeyType=RANGE >/dev/null
	awslocal dynamodb wait table-exists --table-name "$STRAND_TABLE"
	echo "strand: table $STRAND_TABLE created"
fi

# Queues. create-queue returns the existing queue when the attributes are
# the same, so this is idempotent as long as they do not change.
queue() { # name attributes-json
	awslocal sqs create-queue --queue-name "$1" --attributes "$2" --query QueueUrl --output text
}
queue_arn() { # url
	awslocal sqs get-queue-attributes --queue-url "$1" --attribute-names QueueArn --query Attributes.QueueArn --output text
}
redrive() { # dlq-url max-receives -> RedrivePolicy (a JSON string inside the attributes JSON)
	printf '{\\"deadLetterTargetArn\\":\\"%s\\",\\"maxReceiveCount\\":\\"%s\\"}' "$(queue_arn "$1")" "$2"
}
# Retention, visibility and redrive as in the stack (stack.env): every
# queue keeps a message 14 days, the release and fence queues too (an
# absorb outage longer than SQS's 4-day default must not lose releases).
release_dlq="$(queue "$STRAND_RELEASE_DLQ" "$(printf '{"FifoQueue":"true","MessageRetentionPeriod":"%s"}' "$STRAND_RELEASE_DLQ_RETENTION_SECONDS")")"
release="$(queue "$STRAND_RELEASE_QUEUE" "$(printf '{"FifoQueue":"true","ContentBasedDeduplication":"true","MessageRetentionPeriod":"%s","VisibilityTimeout":"%s","RedrivePolicy":"%s"}' \
	"$STRAND_RELEASE_RETENTION_SECONDS" "$STRAND_RELEASE_VISIBILITY_SECONDS" "$(redrive "$release_dlq" "$STRAND_RELEASE_MAX_RECEIVES")")")"
fence_dlq="$(queue "$STRAND_FENCE_DLQ" "$(printf '{"MessageRetentionPeriod":"%s"}' "$STRAND_FENCE_DLQ_RETENTION_SECONDS")")"
fence="$(queue "$STRAND_FENCE_QUEUE" "$(printf '{"MessageRetentionPeriod":"%s","VisibilityTimeout":"%s","RedrivePolicy":"%s"}' \
	"$STRAND_FENCE_RETENTION_SECONDS" "$STRAND_FENCE_VISIBILITY_SECONDS" "$(redrive "$fence_dlq" "$STRAND_FENCE_MAX_RECEIVES")")")"
echo "strand: release queue $release"
echo "strand: fence queue $fence"
echo "strand: resources ready"
