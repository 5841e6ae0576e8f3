#!/usr/bin/env bash
# Smoke test of the stack deployed by deploy.sh: the same order POSTed twice creates one
# order and replays the first response; the same ledger credit sent to SQS three times is
# credited once. It prints what it sends and what it sees, and exits non-zero on the first
# check that fails. Needs the AWS CLI v2 and curl.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=localstack/env.sh
source localstack/env.sh
# shellcheck source=localstack/probes.sh
source localstack/probes.sh

need aws curl

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

run_id="$(date +%s)-${RANDOM}"
api_id="$(output APIID)"
api_fn="$(output APIFunctionName)"
queue_url="$(output QueueURL)"
orders_table="$(output OrdersTableName)"
ledger_table="$(output LedgerTableName)"
[[ -n "${api_fn}" && -n "${queue_url}" ]] || fail "stack ${STACK_NAME} has no outputs: run make localstack-deploy"

count_orders() {
	aws dynamodb scan --table-name "${orders_table}" --select COUNT --query Count --output text
}

# ---------------------------------------------------------------------------------------
step "1. POST /orders twice with one Idempotency-Key: one order, the same response twice"

key="smoke-order-${run_id}"
order='{"sku":"WIDGET-42","quantity":2,"amount_cents":1250}'
orders_before="$(count_orders)"

mode="${API_MODE:-auto}"
if [[ "${mode}" == auto ]]; then
	mode="$(api_mode "${api_id}")"
fi
if [[ "${mode}" == http ]]; then
	http_api "${api_id}"
fi

# post N sends the order and leaves status, replay flag and body in ${work}/N.*.
post() {
	if [[ "${mode}" == http ]]; then
		curl -sS "${resolve[@]}" -D "${work}/$1.headers" -o "${work}/$1.body" -w '%{http_code}' \
			-X POST "${api_url}/orders" -H 'Content-Type: application/json' \
			-H "Idempotency-Key: ${key}" -d "${order}" >"${work}/$1.status"
		if grep -qi '^idempotent-replayed: *true' "${work}/$1.headers"; then echo true; else echo false; fi >"${work}/$1.replayed"
		return
	fi
	# Without API Gateway V2 in LocalStack: the event API Gateway would send, straight to the
	# function.
	local escaped="${order//\"/\\\"}"
	cat >"${work}/$1.event" <<-JSON
		{"version":"2.0","routeKey":"POST /orders","rawPath":"/orders","rawQueryString":"",
		 "headers":{"content-type":"application/json","idempotency-key":"${key}"},
		 "requestContext":{"accountId":"000000000000","apiId":"smoke","http":{"method":"POST",
		  "path":"/orders","protocol":"HTTP/1.1","sourceIp":"127.0.0.1","userAgent":"smoke"},
		  "requestId":"smoke-$1","routeKey":"POST /orders","stage":"\$default"},
		 "body":"${escaped}","isBase64Encoded":false}
	JSON
	# The first invocation may wait for LocalStack to pull the runtime image.
	aws lambda invoke --cli-read-timeout 300 --function-name "${api_fn}" --cli-binary-format raw-in-base64-out \
		--payload "fileb://${work}/$1.event" "${work}/$1.response" >/dev/null
	sed -E 's/.*"statusCode": *([0-9]+).*/\1/' "${work}/$1.response" >"${work}/$1.status"
	sed -E 's/.*"body": *"(([^"\\]|\\.)*)".*/\1/; s/\\"/"/g' "${work}/$1.response" >"${work}/$1.body"
	if grep -q '"Idempotent-Replayed": *"true"' "${work}/$1.response"; then echo true; else echo false; fi >"${work}/$1.replayed"
}

echo "   via ${mode}; Idempotency-Key: ${key}"
echo "   body: ${order}"
post first
post second
first_status="$(cat "${work}/first.status")"
first_body="$(cat "${work}/first.body")"
first_replayed="$(cat "${work}/first.replayed")"
second_status="$(cat "${work}/second.status")"
second_body="$(cat "${work}/second.body")"
second_replayed="$(cat "${work}/second.replayed")"
echo "   first:  ${first_status} ${first_body}"
echo "   second: ${second_status} ${second_body}"
expect "first status" 201 "${first_status}"
expect "second status" 201 "${second_status}"
expect "first replayed" false "${first_replayed}"
expect "second replayed" true "${second_replayed}"
expect "same body" "${first_body}" "${second_body}"
order_id="$(grep -oE '"id":"[0-9a-f]{32}"' "${work}/first.body" | grep -oE '[0-9a-f]{32}' || true)"
[[ -n "${order_id}" ]] || fail "no order id in the response"
orders_after="$(count_orders)"
expect "orders created" 1 "$((orders_after - orders_before))"
stored="$(aws dynamodb get-item --table-name "${orders_table}" --consistent-read \
	--key "{\"id\":{\"S\":\"${order_id}\"}}" --query Item.id.S --output text)"
expect "order ${order_id} stored" "${order_id}" "${stored}"
if [[ "${mode}" == http ]]; then
	got="$(curl -s -o /dev/null -w '%{http_code}' "${resolve[@]}" "${api_url}/orders/${order_id}")" || true
	expect "GET /orders/{id}" 200 "${got}"
fi

# ---------------------------------------------------------------------------------------
step "2. One ledger credit sent to SQS three times (one Idempotency-Key): credited once"

account="smoke-acct-${run_id}"
transfer="smoke-transfer-${run_id}"
credit="{\"account_id\":\"${account}\",\"amount_cents\":700}"
attrs="{\"Idempotency-Key\":{\"DataType\":\"String\",\"StringValue\":\"${transfer}\"}}"

balance() {
	aws dynamodb get-item --table-name "${ledger_table}" --consistent-read \
		--key "{\"account_id\":{\"S\":\"${account}\"}}" --query Item.balance_cents.N --output text
}

# credited waits until the account has a balance: the first batch may wait for LocalStack
# to pull the runtime image.
credited() {
	local b
	for _ in $(seq 150); do
		b="$(balance)"
		if [[ "${b}" != None ]]; then
			return
		fi
		sleep 2
	done
	fail "no credit for ${account} after 300 s: see the function's logs (make localstack-logs)"
}

# drain waits until the queue has no visible or in-flight messages.
drain() {
	local counts visible in_flight
	sleep 3 # the counts are approximate and lag a send
	for _ in $(seq 60); do
		counts="$(aws sqs get-queue-attributes --queue-url "${queue_url}" \
			--attribute-names ApproximateNumberOfMessages ApproximateNumberOfMessagesNotVisible \
			--query 'Attributes.[ApproximateNumberOfMessages,ApproximateNumberOfMessagesNotVisible]' \
			--output text)"
		read -r visible in_flight <<<"${counts}"
		if [[ "${visible}" == 0 && "${in_flight}" == 0 ]]; then
			return
		fi
		sleep 2
	done
	fail "the queue did not drain in 120 s (visible ${visible}, in flight ${in_flight})"
}

echo "   body: ${credit}, Idempotency-Key: ${transfer}"
send_credit "${queue_url}" "${credit}" "${attrs}"
send_credit "${queue_url}" "${credit}" "${attrs}" "a producer retry"
credited
drain
b="$(balance)"
expect "balance after two sends" 700 "${b}"
send_credit "${queue_url}" "${credit}" "${attrs}" "a late duplicate"
drain
b="$(balance)"
expect "balance after a third send" 700 "${b}"

printf '\nsmoke: OK\n'
