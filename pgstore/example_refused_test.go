package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/pgstoretest"
)

// A payments API whose table refuses an unsupported currency with a CHECK constraint. The
// handler inserts the payment with pgstore.Attach and answers 201, but the constraint
// refuses the INSERT when the completion commits, so nothing commits. The one thing added
// for that is the mapping, idemhttp.WithRefused: it answers 422 problem+json for that
// constraint, and the answer is stored, so the client's retry gets it replayed instead of
// running the handler again. (It runs on the test binary's PostgreSQL, in a schema of its
// own: see package pgstoretest.)
func Example_refused() {
	ctx := context.Background()
	pool, closePool, err := pgstoretest.Open(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := closePool(); err != nil { // drops the schema
			log.Fatal(err)
		}
	}()
	if _, err := pool.Exec(ctx, `CREATE TABLE payments (id text PRIMARY KEY, amount bigint NOT NULL,
		currency text NOT NULL CONSTRAINT payments_currency_supported CHECK (currency IN ('EUR', 'USD')))`); err != nil {
		log.Fatal(err)
	}
	if err := pgstore.CreateTable(ctx, pool, pgstore.DefaultTable); err != nil {
		log.Fatal(err)
	}
	store, err := pgstore.New(pool, pgstore.DefaultTable)
	if err != nil {
		log.Fatal(err)
	}
	guard, err := idem.New(store, "create-payment")
	if err != nil {
		log.Fatal(err)
	}
	// The mapping: the currency constraint's refusal is a 422, stored and replayed.
	idempotent, err := idemhttp.Middleware(guard, idemhttp.WithRefused(func(_ context.Context, err error) (idemhttp.Problem, bool) {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.ConstraintName == "payments_currency_supported" {
			return idemhttp.Problem{
				Status: http.StatusUnprocessableEntity,
				Type:   "https://example.com/problems/unsupported-currency",
				Detail: "the currency is not supported; use EUR or USD",
			}, true
		}
		return idemhttp.Problem{}, false // any other refusal: 409, and a retry runs again
	}))
	if err != nil {
		log.Fatal(err)
	}

	createPayment := func(w http.ResponseWriter, r *http.Request) {
		var p struct {
			Amount   int64  `json:"amount"`
			Currency string `json:"currency"`
		}
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, "invalid body", http.StatusBadRequest)
			return
		}
		key := idem.StoredKey(r.Context())
		id := "pay_" + key[len(key)-12:]
		err := pgstore.Attach(r.Context(), func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO payments (id, amount, currency) VALUES ($1, $2, $3)`, id, p.Amount, p.Currency)
			return err
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%q,"amount":%d,"currency":%q}`, id, p.Amount, p.Currency)
	}
	r := chi.NewRouter()
	r.With(idempotent).Post("/payments", createPayment)
	srv := httptest.NewServer(r)
	defer srv.Close()

	postPayment(srv.URL+"/payments", "c0ffee-01", `{"amount":1250,"currency":"XTS"}`)
	postPayment(srv.URL+"/payments", "c0ffee-01", `{"amount":1250,"currency":"XTS"}`) // the client's retry
	postPayment(srv.URL+"/payments", "c0ffee-02", `{"amount":1250,"currency":"EUR"}`)

	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&rows); err != nil {
		log.Fatal(err)
	}
	fmt.Println("payment rows:", rows)
	// Output:
	// 422 {"type":"https://example.com/problems/unsupported-currency","title":"Unprocessable Entity","status":422,"detail":"the currency is not supported; use EUR or USD"}
	// 422 (replayed) {"type":"https://example.com/problems/unsupported-currency","title":"Unprocessable Entity","status":422,"detail":"the currency is not supported; use EUR or USD"}
	// 201 {"id":"pay_28babae0723d","amount":1250,"currency":"EUR"}
	// payment rows: 1
}
