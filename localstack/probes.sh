# The smoke test's checks and probes of the deployed stack; sourced by smoke.sh (after
# env.sh), and by the Go tests in this directory, which run each function against stub
# commands and a local HTTP server.
# shellcheck shell=bash

# fail ends the smoke test.
fail() {
	echo "smoke: FAIL: $*" >&2
	exit 1
}

# expect NAME WANT GOT checks one value and prints it.
expect() {
	if [[ "$3" != "$2" ]]; then
		fail "$1: want $2, got $3"
	fi
	printf '   ok  %-34s %s\n' "$1" "$3"
}

# http_api API_ID sets api_url and resolve (curl's --resolve arguments) for the HTTP API
# with that id. LocalStack serves it on <id>.execute-api.localhost.localstack.cloud at its
# own port; curl resolves that name to 127.0.0.1 itself, so no DNS is needed.
http_api() {
	local host="$1.execute-api.localhost.localstack.cloud" port="${LOCALSTACK_ENDPOINT:?set by env.sh}"
	port="${port##*:}"
	api_url="http://${host}:${port}"
	resolve=(--resolve "${host}:${port}:127.0.0.1")
}

# api_mode API_ID prints how to reach example-api: http when the stack's HTTP API serves it,
# else invoke (the function is invoked with the event API Gateway would send). On
# LocalStack's community image, which has no API Gateway v2, CloudFormation skips the HTTP
# API and its id reads "unknown"; and LocalStack answers 404 for any API it does not know.
# So http needs a real id and, for GET /orders/none, example-api's own 404: a
# problem+json document saying "no such order".
api_mode() {
	local id="$1" probe status
	case "${id}" in
	"" | None | unknown)
		echo invoke
		return
		;;
	*) ;;
	esac
	http_api "${id}"
	probe="$(mktemp -d)"
	# Connection refused or a timeout leaves status 000: not the application.
	status="$(curl -s --max-time 10 -D "${probe}/headers" -o "${probe}/body" -w '%{http_code}' \
		"${resolve[@]}" "${api_url}/orders/none")" || true
	if [[ "${status}" == 404 ]] &&
		grep -qi '^content-type: *application/problem+json' "${probe}/headers" &&
		grep -q '"detail":"no such order"' "${probe}/body"; then
		echo http
	else
		echo invoke
	fi
	rm -rf "${probe}"
}

# send_credit QUEUE_URL BODY ATTRIBUTES [LABEL] sends one message and prints its id, with
# LABEL. A failed send ends the smoke test at once, naming it, rather than leaving it to wait
# for a credit that was never sent.
send_credit() {
	local id
	if ! id="$(aws sqs send-message --queue-url "$1" --message-body "$2" \
		--message-attributes "$3" --query MessageId --output text)"; then
		fail "sqs send-message to $1 failed (see the error above)"
	fi
	echo "   sent message ${id}${4:+ ($4)}"
}
