package idemhttp_test

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/dynamo"
	"github.com/idemkit/idem/idemhttp"
)

// The package documentation's usage: a guard over DynamoDB, and the middleware on a chi
// route, scoped by the user that authentication put in the request's context. It serves
// HTTP, so it claims no output.
func Example_deploy() {
	createOrder := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) }
	userID := func(r *http.Request) string {
		user, _ := r.Context().Value(userKey{}).(string)
		return user
	}
	deploy := func(ddb dynamo.API) error {
		store, err := dynamo.New(ddb, "idempotency")
		if err != nil {
			return err
		}
		guard, err := idem.New(store, "orders-api")
		if err != nil {
			return err
		}
		idempotent, err := idemhttp.Middleware(guard, idemhttp.WithTenant(userID))
		if err != nil {
			return err
		}
		r := chi.NewRouter()
		r.With(idempotent).Post("/orders", createOrder)
		return http.ListenAndServe(":8080", r)
	}
	_ = deploy
}
