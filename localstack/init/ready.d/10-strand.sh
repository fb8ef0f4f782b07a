#!/bin/bash
# LocalStack init hook (ready.d): creates strand's buckets, table and queues
# as the CDK stack does (infra/stack), mapped to what LocalStack offers: the
# Express set is three general-purpose buckets. Idempotent: deploy.sh runs
# it again (docker compose exec) to make sure everything exists.
set -euo pipefail

export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
# shellcheck source=SCRIPTDIR/../../strand.env
. "${STRAND_ENV_FILE:-/etc/strand/strand.env}"
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
redrive() { # dlq-url -> RedrivePolicy (a JSON string inside the attributes JSON)
	printf '{\\"deadLetterTargetArn\\":\\"%s\\",\\"maxReceiveCount\\":\\"5\\"}' "$(queue_arn "$1")"
}
# 14 days in the DLQs; visibility six times the consumer's Lambda timeout
# (absorb 60 s, probe 300 s), as in the stack.
release_dlq="$(queue "$STRAND_RELEASE_DLQ" '{"FifoQueue":"true","MessageRetentionPeriod":"1209600"}')"
release="$(queue "$STRAND_RELEASE_QUEUE" "$(printf '{"FifoQueue":"true","ContentBasedDeduplication":"true","VisibilityTimeout":"360","RedrivePolicy":"%s"}' "$(redrive "$release_dlq")")")"
fence_dlq="$(queue "$STRAND_FENCE_DLQ" '{"MessageRetentionPeriod":"1209600"}')"
fence="$(queue "$STRAND_FENCE_QUEUE" "$(printf '{"VisibilityTimeout":"1800","RedrivePolicy":"%s"}' "$(redrive "$fence_dlq")")")"
echo "strand: release queue $release"
echo "strand: fence queue $fence"
echo "strand: resources ready"
