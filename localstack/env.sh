# Shared settings of the LocalStack scripts; sourced, not run.
# shellcheck shell=bash

# LocalStack's edge endpoint, and the fake account's region and credentials.
export LOCALSTACK_ENDPOINT="${LOCALSTACK_ENDPOINT:-http://127.0.0.1:4566}"
export AWS_REGION="${AWS_REGION:-us-east-1}"
export AWS_DEFAULT_REGION="$AWS_REGION"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
export AWS_PAGER=""
# The AWS CLI v2 and boto3 (so sam) send every request to this endpoint.
export AWS_ENDPOINT_URL="$LOCALSTACK_ENDPOINT"

STACK_NAME="${STACK_NAME:-idem-example}"
SAM_ARTIFACTS_BUCKET="${SAM_ARTIFACTS_BUCKET:-idem-sam-artifacts}"
export STACK_NAME SAM_ARTIFACTS_BUCKET

# need fails unless every named command is installed.
need() {
	local cmd missing=()
	for cmd in "$@"; do
		command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd")
	done
	if ((${#missing[@]} > 0)); then
		echo "localstack: missing command(s): ${missing[*]} (see localstack/README.md)" >&2
		exit 1
	fi
}

# output prints the value of one output of the deployed stack.
output() {
	aws cloudformation describe-stacks --stack-name "$STACK_NAME" \
		--query "Stacks[0].Outputs[?OutputKey=='$1'].OutputValue" --output text
}

# step prints a numbered heading.
step() {
	printf '\n== %s\n' "$*"
}
