// Package pgstore is the PostgreSQL [idem.Store].
package pgstore
