# Shared settings of the LocalStack scripts; sourced, not run.
# shellcheck shell=bash

# LocalStack's edge endpoint, and the fake account's region and credentials.
export LOCALSTACK_ENDPOINT="${LOCALSTACK_ENDPOINT:-http://127.0.0.1:4566}"
export AWS_REGION="${AWS_REGION:-us-east-1}"
export AWS_DEFAULT_REGION="${AWS_REGION}"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
export AWS_PAGER=""
# The AWS CLI v2 and boto3 (so sam) send every request to this endpoint.
export AWS_ENDPOINT_URL="${LOCALSTACK_ENDPOINT}"

STACK_NAME="${STACK_NAME:-idem-example}"
# The bucket sam deploy uploads to; compose.sh passes it into the container, whose init
# hook creates it.
SAM_ARTIFACTS_BUCKET="${SAM_ARTIFACTS_BUCKET:-idem-sam-artifacts}"
export STACK_NAME SAM_ARTIFACTS_BUCKET

# The LocalStack version both images are pinned at.
LOCALSTACK_VERSION="${LOCALSTACK_VERSION:-4.4}"

# localstack_image prints the image to run: LOCALSTACK_IMAGE if set; else, with an auth
# token, the Pro image, the only one with API Gateway v2 (the HTTP API), as LocalStack's own
# CLI chooses; else the community image, whose stack then has no HTTP API (smoke.sh invokes
# the function directly instead).
localstack_image() {
	if [[ -n "${LOCALSTACK_IMAGE:-}" ]]; then
		echo "${LOCALSTACK_IMAGE}"
	elif [[ -n "${LOCALSTACK_AUTH_TOKEN:-}" ]]; then
		echo "localstack/localstack-pro:${LOCALSTACK_VERSION}"
	else
		echo "localstack/localstack:${LOCALSTACK_VERSION}"
	fi
}

# need fails unless every named command is installed.
need() {
	local cmd missing=()
	for cmd in "$@"; do
		command -v "${cmd}" >/dev/null 2>&1 || missing+=("${cmd}")
	done
	if ((${#missing[@]} > 0)); then
		echo "localstack: missing command(s): ${missing[*]} (see localstack/README.md)" >&2
		exit 1
	fi
}

# output prints the value of one output of the deployed stack.
output() {
	aws cloudformation describe-stacks --stack-name "${STACK_NAME}" \
		--query "Stacks[0].Outputs[?OutputKey=='$1'].OutputValue" --output text
}

# step prints a numbered heading.
step() {
	printf '\n== %s\n' "$*"
}
