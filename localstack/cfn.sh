#!/usr/bin/env bash
# Deploy the CDK stack's synthesized template (the default configuration)
# to LocalStack's CloudFormation and check what it creates against the
# template (cfn.py): the Express set stood in by general-purpose buckets as
# deploy.sh does, the resource types LocalStack's core has no provider for
# left out (listed), the Lambdas' code from deploy.sh's builds.
#   STRAND_TEMPLATE=path ./cfn.sh   # a template synthesized already
#   ./cfn.sh                        # synthesizes it (infra/: go test, ~2 min)
# Core mode (core.sh up) and a deploy.sh run (it builds the Lambda zips).
# shellcheck source=localstack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

core_mode || die "cfn.sh runs against LocalStack's core: ./core.sh up first"
need python3 "python3 runs cfn.py"
for name in absorb settle trim probe; do
	[ -f "$here/build/$name.zip" ] || die "no build/$name.zip: run deploy.sh first"
done
stack="${STRAND_CFN_STACK:-Strand}"
template="${STRAND_TEMPLATE:-$run_dir/template.json}"
if [ -z "${STRAND_TEMPLATE:-}" ]; then
	say "synthesizing the default stack (infra/stack TestLocalStackDescription) -> $template"
	(cd "$root/infra" && STRAND_TEMPLATE_OUT="$template" go test -count=1 -run TestLocalStackDescription ./stack/ >/dev/null)
fi

# The resource types the core has providers for: its plugin entry points.
venv="${STRAND_LOCALSTACK_VENV:-$here/.venv}"
sed -n '/^\[localstack.cloudformation.resource_providers\]/,/^\[/{s/ = .*//p}' \
	"$venv"/lib/python3*/site-packages/localstack_core-*.dist-info/entry_points.txt >"$run_dir/cfn-types.txt"
[ -s "$run_dir/cfn-types.txt" ] || die "no CloudFormation resource providers found in $venv"
say "preparing the template for LocalStack's core"
python3 "$here/cfn.py" prepare "$template" "$run_dir/cfn-types.txt" "$run_dir/template.local.json" | tee "$run_dir/cfn-report.txt"

# The table, on moto's DynamoDB (cfn.py replaced it by this name).
table="$(python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import cfn; print(cfn.TABLE)' "$here")"
awslocal dynamodb describe-table --table-name "$table" >/dev/null 2>&1 ||
	awslocal dynamodb create-table --table-name "$table" --billing-mode PAY_PER_REQUEST \
		--attribute-definitions AttributeName=PK,AttributeType=S AttributeName=SK,AttributeType=S \
		--key-schema AttributeName=PK,KeyType=HASH AttributeName=SK,KeyType=RANGE >/dev/null

# The assets bucket cdk bootstrap would have made, with the Lambdas' code
# under the template's keys, and the template (too large for a body).
assets="cdk-hnb659fds-assets-000000000000-$AWS_DEFAULT_REGION"
awslocal s3api head-bucket --bucket "$assets" >/dev/null 2>&1 || awslocal s3api create-bucket --bucket "$assets" >/dev/null
python3 - "$run_dir/template.local.json" >"$run_dir/cfn-assets.txt" <<-'EOF'
	import json, sys
	for r in json.load(open(sys.argv[1]))["Resources"].values():
	    if r["Type"] == "AWS::Lambda::Function":
	        p = r["Properties"]
	        print(p["FunctionName"].rsplit("-", 1)[1], p["Code"]["S3Key"])
EOF
while read -r name key; do
	awslocal s3 cp --quiet "$here/build/$name.zip" "s3://$assets/$key"
done <"$run_dir/cfn-assets.txt"
awslocal s3 cp --quiet "$run_dir/template.local.json" "s3://$assets/$stack.template.json"

if awslocal cloudformation describe-stacks --stack-name "$stack" >/dev/null 2>&1; then
	say "deleting the previous stack $stack"
	awslocal cloudformation delete-stack --stack-name "$stack"
	awslocal cloudformation wait stack-delete-complete --stack-name "$stack" ||
		die "the previous stack $stack could not be deleted: start a fresh core (./core.sh down; ./core.sh up)"
fi
say "create-stack $stack"
awslocal cloudformation create-stack --stack-name "$stack" --template-url "$ENDPOINT/$assets/$stack.template.json" \
	--capabilities CAPABILITY_IAM CAPABILITY_NAMED_IAM >/dev/null
if ! awslocal cloudformation wait stack-create-complete --stack-name "$stack"; then
	awslocal cloudformation describe-stack-events --stack-name "$stack" \
		--query 'StackEvents[?contains(ResourceStatus, `FAILED`)].[LogicalResourceId,ResourceType,ResourceStatusReason]' --output text >&2
	die "stack $stack was not created (failed resources above)"
fi

# What it created, against the template.
awslocal cloudformation describe-stack-resources --stack-name "$stack" --output json >"$run_dir/cfn-resources.json"
python3 - "$run_dir/cfn-resources.json" >"$run_dir/cfn-queues.txt" <<-'EOF'
	import json, sys
	for r in json.load(open(sys.argv[1]))["StackResources"]:
	    if r["ResourceType"] == "AWS::SQS::Queue":
	        print(r["LogicalResourceId"], r["PhysicalResourceId"])
EOF
queues="{"
while read -r lid url; do
	queues="$queues\"$lid\":$(awslocal sqs get-queue-attributes --queue-url "$url" --attribute-names All --query Attributes --output json),"
done <"$run_dir/cfn-queues.txt"
printf '%s}' "${queues%,}" >"$run_dir/cfn-queues.json"
python3 "$here/cfn.py" check "$run_dir/template.local.json" "$run_dir/cfn-resources.json" "$run_dir/cfn-queues.json"
