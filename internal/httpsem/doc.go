// Package httpsem holds the HTTP semantics of idem's HTTP wrappers, once for both: the
// Lambda decorators of package lambdawrap and the net/http middleware of package idemhttp.
// It knows requests and responses ([Request], [Response]), not where they come from: each
// wrapper maps its own request onto a Request and writes the Response back its own way.
//
// A request goes through [Guard.Admit], which finds its key in the Idempotency-Key header
// (or says the guard does not apply, or refuses it with 400), then, once the wrapper has
// read its tenant and fingerprint, through [Guard.Run], which runs the handler under
// idem.Do and maps what comes back onto HTTP: a replay with Idempotent-Replayed, a 409 with
// Retry-After, a 422, a 503, and problem details (RFC 9457) named after the wrapper's own
// package. The table of what is answered when is in the documentation of both public
// packages, which the tests of both show.
//
// It is internal: users import lambdawrap or idemhttp, which re-export what they need of
// it (the defaults, the problem types under their own names).
package httpsem
