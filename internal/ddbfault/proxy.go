package ddbfault

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Action is what a [Proxy] does to a request.
type Action string

// The proxy's actions.
const (
	// Drop closes the client's connection as the request arrives, before any of it reaches
	// DynamoDB: the call did not happen.
	Drop Action = "drop"
	// Cut forwards the request and closes the client's connection when the response starts:
	// the call happened, the caller cannot know.
	Cut Action = "cut"
	// Delay holds the response back for the rule's delay before passing it on.
	Delay Action = "delay"
)

// Rule applies an action to the next Times requests of one DynamoDB operation.
type Rule struct {
	Op     string // "PutItem", "UpdateItem", …; "" matches every operation
	Action Action
	Times  int           // how many requests; < 0: every request
	Delay  time.Duration // for Delay
}

// Proxy is a TCP proxy on 127.0.0.1 in front of DynamoDB (Local) that drops, cuts or delays
// chosen requests, so that the SDK's retryer meets real connection failures. It recognises
// the operation of a request by its X-Amz-Target header. Its methods are safe for
// concurrent use; Close stops it and waits for its goroutines.
type Proxy struct {
	ln       net.Listener
	upstream string

	mu       sync.Mutex
	rules    []*Rule
	injected map[Action]int
	conns    map[net.Conn]struct{}
	closed   bool

	wg sync.WaitGroup
}

// NewProxy listens on a free port of 127.0.0.1 and forwards to upstream (host:port).
func NewProxy(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, upstream: upstream, injected: map[Action]int{}, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// URL returns the proxy's endpoint, for an SDK client's BaseEndpoint.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Add appends r to the rules; the first matching rule with requests left applies.
func (p *Proxy) Add(r Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, &r)
}

// Reset removes every rule.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = nil
}

// Injected returns how many requests a had applied to.
func (p *Proxy) Injected(a Action) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.injected[a]
}

// Close stops accepting, closes every connection and waits for the proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// match takes one request of the rule that applies to op, if any.
func (p *Proxy) match(op string) (Rule, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.rules {
		if r.Times == 0 || (r.Op != "" && r.Op != op) {
			continue
		}
		if r.Times > 0 {
			r.Times--
		}
		p.injected[r.Action]++
		return *r, true
	}
	return Rule{}, false
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve proxies one client connection over its own upstream connection. HTTP/1.1 keeps one
// request in flight per connection, so the operation of the latest request tells which
// response the upstream bytes belong to.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	up, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
	if err != nil {
		_ = client.Close()
		return
	}
	if !p.track(client) || !p.track(up) {
		_ = client.Close()
		_ = up.Close()
		return
	}
	defer p.untrack(client)
	defer p.untrack(up)
	closeBoth := func() { _ = client.Close(); _ = up.Close() }

	var mu sync.Mutex
	var pending *Rule // the rule for the request whose response comes next
	done := make(chan struct{})
	go func() { // upstream → client
		defer close(done)
		buf := make([]byte, 32<<10)
		for {
			n, err := up.Read(buf)
			if n > 0 {
				mu.Lock()
				r := pending
				pending = nil
				mu.Unlock()
				if r != nil && r.Action == Cut {
					closeBoth()
					return
				}
				if r != nil && r.Action == Delay {
					time.Sleep(r.Delay)
				}
				if _, werr := client.Write(buf[:n]); werr != nil {
					closeBoth()
					return
				}
			}
			if err != nil {
				closeBoth()
				return
			}
		}
	}()

	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			if op := operation(buf[:n]); op != "" {
				r, ok := p.match(op)
				if ok && r.Action == Drop {
					closeBoth()
					break
				}
				mu.Lock()
				pending = nil
				if ok {
					pending = &r
				}
				mu.Unlock()
			}
			if _, werr := up.Write(buf[:n]); werr != nil {
				closeBoth()
				break
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				closeBoth()
			}
			_ = up.(*net.TCPConn).CloseWrite()
			break
		}
	}
	<-done
}

var targetHeader = []byte("X-Amz-Target: DynamoDB_20120810.")

// operation returns the DynamoDB operation named in a request's headers, or "" for a chunk
// that holds none (the rest of a body).
func operation(b []byte) string {
	i := bytes.Index(b, targetHeader)
	if i < 0 {
		return ""
	}
	rest := b[i+len(targetHeader):]
	end := bytes.IndexAny(rest, "\r\n")
	if end < 0 {
		return ""
	}
	return string(rest[:end])
}
