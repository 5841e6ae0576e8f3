#!/usr/bin/env bash
# docker compose for LocalStack (compose.yaml), with the image and settings of env.sh:
# `localstack/compose.sh up -d --wait`, `... logs`, `... down --volumes` (the Makefile's
# localstack-* targets).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=localstack/env.sh
source localstack/env.sh

need docker
LOCALSTACK_IMAGE="$(localstack_image)"
export LOCALSTACK_IMAGE
exec docker compose -f localstack/compose.yaml "$@"
