#!/usr/bin/env bash
# Builds the functions with `sam build` (through the Makefile's build-<LogicalId> targets)
# and deploys infra/template.yaml to LocalStack. Needs Docker (LocalStack running: `make
# localstack-up`), the SAM CLI, the AWS CLI, Go, make and curl; samlocal is used when
# installed.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=localstack/env.sh
source localstack/env.sh

# Every tool first, so a missing one is named rather than blamed on LocalStack.
need sam aws go make curl
if ! curl -fsS "${LOCALSTACK_ENDPOINT}/_localstack/health" >/dev/null; then
	echo "localstack: nothing answers on ${LOCALSTACK_ENDPOINT}: run make localstack-up first" >&2
	exit 1
fi

step "sam build"
# --build-in-source runs the Makefile targets in this checkout instead of a copy of it.
sam build --template-file infra/template.yaml --build-dir .aws-sam/build --build-in-source

step "deploy stack ${STACK_NAME} to ${LOCALSTACK_ENDPOINT}"
deploy=(sam)
if command -v samlocal >/dev/null 2>&1; then
	deploy=(samlocal)
fi
"${deploy[@]}" deploy \
	--template-file .aws-sam/build/template.yaml \
	--stack-name "${STACK_NAME}" \
	--s3-bucket "${SAM_ARTIFACTS_BUCKET}" \
	--capabilities CAPABILITY_IAM \
	--region "${AWS_REGION}" \
	--no-confirm-changeset \
	--no-fail-on-empty-changeset

step "outputs"
aws cloudformation describe-stacks --stack-name "${STACK_NAME}" \
	--query 'Stacks[0].Outputs[].[OutputKey,OutputValue]' --output text
