package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/lambdawrap"
)

// Limits of an order request.
const (
	maxSKULength = 64
	maxQuantity  = 10_000
	maxAmount    = 100_000_000 // cents
)

// Order is an order as stored in the orders table and returned by the API.
type Order struct {
	ID          string    `json:"id" dynamodbav:"id"`
	SKU         string    `json:"sku" dynamodbav:"sku"`
	Quantity    int       `json:"quantity" dynamodbav:"quantity"`
	AmountCents int64     `json:"amount_cents" dynamodbav:"amount_cents"`
	CreatedAt   time.Time `json:"created_at" dynamodbav:"created_at"`
}

// orderRequest is the body of POST /orders. Pointers tell a missing field from a zero.
type orderRequest struct {
	SKU         *string `json:"sku"`
	Quantity    *int    `json:"quantity"`
	AmountCents *int64  `json:"amount_cents"`
}

// ordersAPI is the part of the DynamoDB client the orders need beyond the guarded write,
// which goes through the idempotency store's transaction.
type ordersAPI interface {
	GetItem(ctx context.Context, params *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// orders serves POST /orders and GET /orders/{id} over the orders table.
type orders struct {
	db     ordersAPI
	table  string
	now    func() time.Time
	logger *slog.Logger
}

// handle routes an HTTP API request. Only POST /orders is guarded (by the decorator
// around it); GET is safe and passes through.
func (o *orders) handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	method, path := req.RequestContext.HTTP.Method, req.RawPath
	switch {
	case path == "/orders" && method == http.MethodPost:
		return o.create(ctx, req)
	case path == "/orders":
		return methodNotAllowed(http.MethodPost), nil
	case strings.HasPrefix(path, "/orders/") && method == http.MethodGet:
		return o.get(ctx, strings.TrimPrefix(path, "/orders/"))
	case strings.HasPrefix(path, "/orders/"):
		return methodNotAllowed(http.MethodGet), nil
	}
	return problem(http.StatusNotFound, "no such resource"), nil
}

// create validates the order, attaches its row to the completion of the idempotency
// record and answers 201. The row and the record commit in one transaction: a crash
// before the commit leaves neither, so the retry creates the order exactly once. A
// validation error is a 400 that the decorator stores, so the retry gets the same 400.
func (o *orders) create(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	in, err := parseOrder(req)
	if err != nil {
		return problem(http.StatusBadRequest, err.Error()), nil
	}
	order := Order{
		ID:          newID(),
		SKU:         *in.SKU,
		Quantity:    *in.Quantity,
		AmountCents: *in.AmountCents,
		CreatedAt:   o.now().UTC().Truncate(time.Millisecond),
	}
	item, err := attributevalue.MarshalMap(order)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, fmt.Errorf("encode order: %w", err)
	}
	err = dynamo.Attach(ctx, types.TransactWriteItem{Put: &types.Put{
		TableName:                aws.String(o.table),
		Item:                     item,
		ConditionExpression:      aws.String("attribute_not_exists(#id)"),
		ExpressionAttributeNames: map[string]string{"#id": "id"},
	}})
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, fmt.Errorf("attach order: %w", err)
	}
	resp, err := jsonResponse(http.StatusCreated, order)
	resp.Headers["Location"] = "/orders/" + order.ID
	return resp, err
}

// get answers the order with the given id, or 404.
func (o *orders) get(ctx context.Context, id string) (events.APIGatewayV2HTTPResponse, error) {
	if id == "" || strings.Contains(id, "/") {
		return problem(http.StatusNotFound, "no such order"), nil
	}
	out, err := o.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(o.table),
		Key:            map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		// The orders table failed (throttled, 5xx, unreachable). Answer as the guarded POST
		// does when DynamoDB fails, 503 with Retry-After, rather than failing the
		// invocation, which API Gateway would show as a bare 500.
		o.logger.ErrorContext(ctx, "example-api: reading the orders table failed", "error", err)
		return unavailable(), nil
	}
	if out.Item == nil {
		return problem(http.StatusNotFound, "no such order"), nil
	}
	var order Order
	if err := attributevalue.UnmarshalMap(out.Item, &order); err != nil {
		return events.APIGatewayV2HTTPResponse{}, fmt.Errorf("decode order: %w", err)
	}
	return jsonResponse(http.StatusOK, order)
}

// parseOrder decodes and validates the body of POST /orders.
func parseOrder(req events.APIGatewayV2HTTPRequest) (orderRequest, error) {
	body := []byte(req.Body)
	if req.IsBase64Encoded {
		var err error
		if body, err = base64.StdEncoding.DecodeString(req.Body); err != nil {
			return orderRequest{}, errors.New("body: not valid base64")
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var in orderRequest
	if err := dec.Decode(&in); err != nil {
		return orderRequest{}, decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return orderRequest{}, errors.New("body: unexpected data after the JSON object")
	}
	switch {
	case in.SKU == nil || *in.SKU == "":
		return orderRequest{}, errors.New("sku: required")
	case len(*in.SKU) > maxSKULength:
		return orderRequest{}, fmt.Errorf("sku: at most %d bytes", maxSKULength)
	case in.Quantity == nil:
		return orderRequest{}, errors.New("quantity: required")
	case *in.Quantity < 1 || *in.Quantity > maxQuantity:
		return orderRequest{}, fmt.Errorf("quantity: must be between 1 and %d", maxQuantity)
	case in.AmountCents == nil:
		return orderRequest{}, errors.New("amount_cents: required")
	case *in.AmountCents < 1 || *in.AmountCents > maxAmount:
		return orderRequest{}, fmt.Errorf("amount_cents: must be between 1 and %d", maxAmount)
	}
	return in, nil
}

// decodeError turns a JSON decoding error into a message for the client, without Go type
// names.
func decodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return fmt.Errorf("%s: must be a JSON %s", typeErr.Field, jsonKind(typeErr.Type.Kind()))
	case errors.As(err, &typeErr):
		return errors.New("body: must be a JSON object")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// encoding/json has no type for it; the field name is what the client needs.
		return errors.New("body: " + strings.TrimPrefix(err.Error(), "json: "))
	}
	return errors.New("body: not valid JSON")
}

// jsonKind names the JSON type a Go kind decodes from.
func jsonKind(k reflect.Kind) string {
	if k == reflect.String {
		return "string"
	}
	return "integer"
}

// newID returns a random order id: 128 bits, hex.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// jsonResponse answers v as JSON with the given status.
func jsonResponse(status int, v any) (events.APIGatewayV2HTTPResponse, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, fmt.Errorf("encode response: %w", err)
	}
	return events.APIGatewayV2HTTPResponse{
		StatusCode: status,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       string(body),
	}, nil
}

// problem answers an RFC 9457 problem details document.
func problem(status int, detail string) events.APIGatewayV2HTTPResponse {
	body, _ := json.Marshal(map[string]any{ // a map of strings and an int always encodes
		"type":   "about:blank",
		"title":  http.StatusText(status),
		"status": status,
		"detail": detail,
	})
	return events.APIGatewayV2HTTPResponse{
		StatusCode: status,
		Headers:    map[string]string{"Content-Type": "application/problem+json"},
		Body:       string(body),
	}
}

// unavailable answers 503 with the Retry-After that lambdawrap gives when the idempotency
// store fails, so a client treats both outages alike.
func unavailable() events.APIGatewayV2HTTPResponse {
	resp := problem(http.StatusServiceUnavailable, "the orders table is unavailable; retry later")
	resp.Headers["Retry-After"] = strconv.Itoa(int((lambdawrap.StoreRetryAfter + time.Second - 1) / time.Second))
	return resp
}

// methodNotAllowed answers 405 with the allowed method.
func methodNotAllowed(allow string) events.APIGatewayV2HTTPResponse {
	resp := problem(http.StatusMethodNotAllowed, "use "+allow)
	resp.Headers["Allow"] = allow
	return resp
}
