package idem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/memstore"
)

// FuzzReplayRecord feeds arbitrary stored records to the guard: whatever a record holds, a
// replay returns a value or a documented error, and never runs the handler again.
func FuzzReplayRecord(f *testing.F) {
	f.Add([]byte(`{"n":1}`), "json", 1, "COMPLETED")
	f.Add([]byte("\x1f\x8b\x08\x00garbage"), "json+gzip", 1, "COMPLETED")
	f.Add([]byte(`card declined`), "error", 1, "FAILED")
	f.Add([]byte(nil), "none", 1, "COMPLETED")
	f.Add([]byte(`{"n":1}`), "", 0, "COMPLETED")
	f.Add([]byte(`{"n":1}`), "json", 7, "DONE")
	f.Fuzz(func(t *testing.T, data []byte, enc string, version int, status string) {
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		s := memstore.New()
		g, err := idem.New(s, "test", idem.WithClock(idem.ClockFunc(func() time.Time { return now })))
		if err != nil {
			t.Fatal(err)
		}
		req := idem.Request{Key: "k"}
		sk, _ := g.StoredKey(req)
		s.Put(idemstore.Record{Key: sk, Status: idemstore.Status(status), Expires: now.Add(time.Hour),
			LeaseExpires: now.Add(time.Minute), Data: data, Encoding: enc, Version: version, LeaseToken: "t"})
		ran := false
		_, _, err = idem.Do(context.Background(), g, req, func(context.Context) (struct{ N int }, error) {
			ran = true
			return struct{ N int }{}, nil
		})
		if ran {
			t.Fatalf("handler ran over a live record (status %q)", status)
		}
		if err != nil {
			for _, known := range []error{idem.ErrIncompatibleRecord, idem.ErrResultNotStored, idem.ErrFailed, idem.ErrInProgress} {
				if errors.Is(err, known) {
					return
				}
			}
			t.Fatalf("undocumented error: %v", err)
		}
	})
}
