package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idemkit/idem/idemstore"
	"github.com/idemkit/idem/internal/termtext"
)

// tokenPrefix is how many characters of a lease token or fingerprint idemctl shows: enough
// to tell owners apart in logs, too few to stand in for the token.
const tokenPrefix = 8

// States of a record as idemctl describes it: what the next request with its key meets.
const (
	stateLeaseRunning = "in-progress"    // an owner holds the key until its lease ends
	stateLeaseEnded   = "lease-ended"    // the owner's lease ended; the next request takes over
	stateCompleted    = "completed"      // the stored result is replayed
	stateFailed       = "failed"         // the remembered failure is replayed
	stateExpired      = "expired"        // past its expiry: counts as absent, whatever its status
	stateHeld         = "held-to-expiry" // in progress without a lease end: held until expiry
)

// view is a record as idemctl shows it, in text or JSON. It never holds a whole lease
// token or the result itself.
type view struct {
	StoredKey   string     `json:"stored_key"`
	Status      string     `json:"status"`
	State       string     `json:"state"`
	LeaseEnd    *time.Time `json:"lease_end,omitempty"`
	OwnerToken  string     `json:"owner_token_prefix,omitempty"`
	Checkpoint  string     `json:"checkpoint,omitempty"`
	Expires     *time.Time `json:"expires,omitempty"`
	ResultBytes int        `json:"result_bytes"`
	Encoding    string     `json:"encoding,omitempty"`
	Fingerprint string     `json:"fingerprint_prefix,omitempty"`
	Version     int        `json:"version"`
}

// newView describes rec as of now.
func newView(rec *idemstore.Record, now time.Time) view {
	v := view{
		StoredKey:   rec.Key,
		Status:      string(rec.Status),
		State:       state(rec, now),
		OwnerToken:  prefix(rec.LeaseToken),
		Checkpoint:  rec.Checkpoint,
		ResultBytes: len(rec.Data),
		Encoding:    rec.Encoding,
		Fingerprint: prefix(rec.Fingerprint),
		Version:     rec.Version,
	}
	if !rec.LeaseExpires.IsZero() {
		t := rec.LeaseExpires.UTC()
		v.LeaseEnd = &t
	}
	if !rec.Expires.IsZero() {
		t := rec.Expires.UTC()
		v.Expires = &t
	}
	return v
}

// state says what a request with rec's key would meet at now, with the same boundaries as
// idem's claim: a record counts as expired, and a lease as ended, from the stored instant on.
func state(rec *idemstore.Record, now time.Time) string {
	switch {
	case !rec.Expires.IsZero() && !now.Before(rec.Expires):
		return stateExpired
	case rec.Status == idemstore.StatusCompleted:
		return stateCompleted
	case rec.Status == idemstore.StatusFailed:
		return stateFailed
	case rec.LeaseExpires.IsZero():
		return stateHeld
	case now.Before(rec.LeaseExpires):
		return stateLeaseRunning
	}
	return stateLeaseEnded
}

// prefix returns the first tokenPrefix characters of s.
func prefix(s string) string {
	return s[:min(len(s), tokenPrefix)]
}

// cut prints a prefix as one: with an ellipsis, escaped as [display] does.
func cut(prefix string) string {
	if prefix == "" {
		return "none"
	}
	return termtext.Display(prefix) + "…"
}

// write prints v as a list of fields and returns the first write error.
func (v *view) write(w io.Writer, now time.Time) error {
	c := newColumns(w)
	row := func(name, value string) { c.row(name, value) }
	row("stored key", termtext.Display(v.StoredKey))
	row("status", termtext.Display(v.Status)+" ("+describe(v.State)+")")
	if v.LeaseEnd != nil {
		row("lease end", when(*v.LeaseEnd, now))
	} else if v.Status == string(idemstore.StatusInProgress) {
		row("lease end", "none (held until expiry)")
	}
	row("owner token", cut(v.OwnerToken))
	row("checkpoint", orNone(v.Checkpoint))
	if v.Expires != nil {
		row("expires", when(*v.Expires, now))
	} else {
		row("expires", "never")
	}
	row("result", result(v))
	row("fingerprint", cut(v.Fingerprint))
	row("version", fmt.Sprint(v.Version))
	return c.flush()
}

// describe explains a state in a few words.
func describe(state string) string {
	switch state {
	case stateLeaseRunning:
		return "lease running: a request now gets 409 or waits"
	case stateLeaseEnded:
		return "lease ended, nobody retried: the next request takes over"
	case stateHeld:
		return "no lease end: held until it expires"
	case stateCompleted:
		return "the stored result is replayed"
	case stateFailed:
		return "the remembered failure is replayed"
	case stateExpired:
		return "expired: counts as absent, the next request runs"
	}
	return state
}

func result(v *view) string {
	switch {
	case v.Encoding == idemstore.EncodingNone:
		return "none stored (too large or not encodable: a replay gets ErrResultNotStored)"
	case v.Encoding == "" && v.ResultBytes == 0:
		return "none"
	}
	return fmt.Sprintf("%d bytes, %s", v.ResultBytes, orNone(v.Encoding))
}

// when prints t in UTC with how far it is from now.
func when(t, now time.Time) string {
	return t.Format(time.RFC3339Nano) + " (" + relative(t, now) + ")"
}

// relative says how far t is from now, to the second.
func relative(t, now time.Time) string {
	d := t.Sub(now).Round(time.Second)
	switch {
	case d > 0:
		return "in " + d.String()
	case d < 0:
		return (-d).String() + " ago"
	}
	return "now"
}

// orNone prints a stored value escaped as [display] does, "none" if it is empty (and a
// value "none" quoted, so the two never look alike).
func orNone(s string) string {
	switch s {
	case "":
		return "none"
	case "none":
		return `"none"`
	}
	return termtext.Display(s)
}

// writeList prints views as a table, one line each, and returns the first write error.
func writeList(w io.Writer, views []view, now time.Time) error {
	c := newColumns(w)
	c.row("STATE", "STORED KEY", "LEASE END", "OWNER", "CHECKPOINT")
	for _, v := range views {
		lease := "none"
		if v.LeaseEnd != nil {
			lease = v.LeaseEnd.Format(time.RFC3339) + " (" + relative(*v.LeaseEnd, now) + ")"
		}
		c.row(v.State, termtext.Display(v.StoredKey), lease, cut(v.OwnerToken), orNone(v.Checkpoint))
	}
	return c.flush()
}

// columns lines up rows of cells in columns and keeps the first write error.
type columns struct {
	tw  *tabwriter.Writer
	err error
}

func newColumns(w io.Writer) *columns {
	return &columns{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
}

// row adds one line of cells.
func (c *columns) row(cells ...string) {
	if c.err == nil {
		_, c.err = io.WriteString(c.tw, strings.Join(cells, "\t")+"\n")
	}
}

// flush writes the lines out and returns the first error.
func (c *columns) flush() error {
	if c.err != nil {
		return c.err
	}
	return c.tw.Flush()
}
