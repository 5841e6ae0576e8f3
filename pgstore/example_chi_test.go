package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/pgstoretest"
)

// A chi payments API on PostgreSQL. idemhttp's middleware guards POST /payments, and the
// handler's r.Context() is the guarded run's context: it carries the lease, so
// pgstore.Attach adds the payment row to the transaction that stores the response, and
// idem.StoredKey names the payment alike in every run of the request. The retry replays
// the response; the row is inserted once. (It runs on the test binary's PostgreSQL, in a
// schema of its own: see package pgstoretest.)
func Example_chi() {
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
	if _, err := pool.Exec(ctx, `CREATE TABLE payments (id text PRIMARY KEY, amount bigint NOT NULL)`); err != nil {
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
	idempotent, err := idemhttp.Middleware(guard)
	if err != nil {
		log.Fatal(err)
	}

	createPayment := func(w http.ResponseWriter, r *http.Request) {
		var p struct {
			Amount int64 `json:"amount"`
		}
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, "invalid body", http.StatusBadRequest) // stored: a retry gets the same 400
			return
		}
		// r.Context() carries the lease: Attach and StoredKey read it there.
		key := idem.StoredKey(r.Context()) // "<scope>.<operation>#<sha256 hex>", never the raw key
		id := "pay_" + key[len(key)-12:]
		err := pgstore.Attach(r.Context(), func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO payments (id, amount) VALUES ($1, $2)`, id, p.Amount)
			return err
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError) // a 5xx releases the key
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%q,"amount":%d}`, id, p.Amount)
	}
	r := chi.NewRouter()
	r.With(idempotent).Post("/payments", createPayment)
	srv := httptest.NewServer(r)
	defer srv.Close()

	postPayment(srv.URL+"/payments", "7f3a-91c2", `{"amount":1250}`)
	postPayment(srv.URL+"/payments", "7f3a-91c2", `{"amount":1250}`) // the client's retry

	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&rows); err != nil {
		log.Fatal(err)
	}
	fmt.Println("payment rows:", rows)
	// Outside a guarded run there is no lease to attach to.
	err = pgstore.Attach(ctx, func(context.Context, pgx.Tx) error { return nil })
	fmt.Println("Attach outside the middleware:", errors.Is(err, idem.ErrNoLease))
	// Output:
	// 201 {"id":"pay_69309095b7f9","amount":1250}
	// 201 (replayed) {"id":"pay_69309095b7f9","amount":1250}
	// payment rows: 1
	// Attach outside the middleware: true
}

// postPayment sends a POST with an Idempotency-Key and prints the answer.
func postPayment(url, key, body string) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		log.Fatal(err)
	}
	replayed := ""
	if resp.Header.Get("Idempotent-Replayed") == "true" {
		replayed = " (replayed)"
	}
	fmt.Printf("%d%s %s\n", resp.StatusCode, replayed, b)
}
