#!/usr/bin/env bash
# LocalStack init hook (runs inside the container once the services are ready): the S3
# bucket that `sam deploy` uploads the built functions to. compose.yaml passes
# SAM_ARTIFACTS_BUCKET in from env.sh.
set -euo pipefail

bucket="${SAM_ARTIFACTS_BUCKET:-idem-sam-artifacts}"
if ! awslocal s3api head-bucket --bucket "${bucket}" >/dev/null 2>&1; then
	awslocal s3 mb "s3://${bucket}"
fi
echo "idem: artifacts bucket ${bucket} ready"
