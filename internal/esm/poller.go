package esm

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
)

// Poller is an event source mapping for one stream and one function: it reads the
// stream's shards from its [Source] and invokes the handler with batches of records, under
// the rules of the package documentation. Its methods are safe for concurrent use; one
// [Poller.Drain] runs at a time.
type Poller struct {
	src     Source
	handler lambda.Handler
	cfg     config

	drain sync.Mutex // one Drain at a time

	mu       sync.Mutex // guards what follows
	shards   map[string]*shard
	report   Report
	requests int
}

// New returns a poller that reads src and invokes handler: a [lambda.Handler], or any
// handler function lambda.Start accepts, which [lambda.NewHandler] wraps. Each shard
// invokes it from a goroutine of its own, so a stream of several shards calls it
// concurrently, as Lambda runs one function instance per shard. It returns an error
// naming the option when an option is out of range.
func New(src Source, handler any, opts ...Option) (*Poller, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	h, ok := handler.(lambda.Handler)
	if !ok {
		h = lambda.NewHandler(handler)
	}
	return &Poller{
		src:     src,
		handler: h,
		cfg:     cfg,
		shards:  map[string]*shard{},
		report:  Report{Checkpoints: map[string]string{}},
	}, nil
}

// shard is the poller's state of one shard. Only its shard's goroutine touches it during
// a drain.
type shard struct {
	id         string
	checkpoint string   // last record done or discarded
	buf        []Record // records read after the checkpoint, in order
	readPos    string   // last record read ("" for none)
	closed     bool     // the source has nothing after readPos, for good
	sizes      []int    // sizes of the batches left by a bisection, first to invoke first
	head       string   // first record of the last batch invoked
	retries    int      // failed invocations that began with head
}

// Drain processes every shard until none has a record left that is neither done nor
// discarded: it returns once a read of each shard finds nothing new, with a copy of the
// report so far. A later Drain goes on from the checkpoints. Shards run concurrently, one
// batch in flight each; a child shard starts once its parent is drained. It returns the
// first error of the source or of ctx (the report then stops where it stopped).
func (p *Poller) Drain(ctx context.Context) (*Report, error) {
	p.drain.Lock()
	defer p.drain.Unlock()
	list, err := p.src.Shards(ctx)
	if err != nil {
		return p.Report(), fmt.Errorf("esm: list shards: %w", err)
	}
	done := make(map[string]chan struct{}, len(list))
	for _, sh := range list {
		done[sh.ID] = make(chan struct{})
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(list))
	for i, sh := range list {
		p.mu.Lock()
		s, ok := p.shards[sh.ID]
		if !ok {
			s = &shard{id: sh.ID}
			p.shards[sh.ID] = s
		}
		p.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done[sh.ID])
			// Lambda processes a parent shard before its children: records of one
			// item or partition key stay in order across a split.
			if parent, ok := done[sh.ParentID]; ok {
				select {
				case <-parent:
				case <-ctx.Done():
					return
				}
			}
			if err := p.drainShard(ctx, s); err != nil {
				errs[i] = fmt.Errorf("esm: shard %s: %w", sh.ID, err)
				cancel()
			}
		}()
	}
	wg.Wait()
	return p.Report(), errors.Join(errs...)
}

// Report returns a copy of the report so far.
func (p *Poller) Report() *Report {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := &Report{
		Invocations: append([]Invocation(nil), p.report.Invocations...),
		Discarded:   append([]Discard(nil), p.report.Discarded...),
		Checkpoints: maps.Clone(p.report.Checkpoints),
	}
	return r
}

// drainShard invokes batches of s until a read finds nothing after the checkpoint.
func (p *Poller) drainShard(ctx context.Context, s *shard) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		want := p.cfg.batchSize
		if len(s.sizes) > 0 {
			want = s.sizes[0]
		}
		if len(s.buf) < want && !s.closed {
			recs, end, err := p.src.Read(ctx, s.id, s.readPos, want-len(s.buf))
			if err != nil {
				return err
			}
			s.buf = append(s.buf, recs...)
			if len(recs) > 0 {
				s.readPos = recs[len(recs)-1].SequenceNumber
			}
			s.closed = end
		}
		if len(s.buf) == 0 {
			return nil
		}
		batch := s.buf[:min(want, len(s.buf))]
		if batch[0].SequenceNumber != s.head {
			s.head, s.retries = batch[0].SequenceNumber, 0
		}
		inv, lowest, err := p.invoke(ctx, s.id, batch, s.retries)
		if err != nil {
			return err
		}
		p.settle(s, &inv, len(batch), lowest)
		if inv.Outcome != Success && p.cfg.retryDelay > 0 {
			if err := sleep(ctx, p.cfg.retryDelay); err != nil {
				return err
			}
		}
	}
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// settle applies an invocation's outcome to its shard and records both.
// lowest is the index in the batch of the lowest failure a partial response reported.
func (p *Poller) settle(s *shard, inv *Invocation, n, lowest int) {
	var discard *Discard
	switch inv.Outcome {
	case Success:
		inv.Done = n
		s.advance(n)
		s.popSize()
	case PartialFailure:
		// AWS: with several failures reported, the checkpoint is the lowest sequence
		// number, and every record from it on is retried. With bisection on as well,
		// the batch splits there and only the rest is retried: the records after the
		// batch wait for it.
		inv.Done = lowest
		s.advance(lowest)
		rest := n - lowest
		if p.cfg.bisect {
			s.setSize(rest)
		} else {
			s.sizes = nil
		}
		discard = p.retry(s, rest)
	case FunctionError, InvalidResponse:
		// AWS: with bisection on, a failed invocation splits the batch in two, and a
		// split does not count against the retry quota. A batch of one record cannot
		// split, so it is retried.
		if p.cfg.bisect && n > 1 {
			first := (n + 1) / 2
			s.sizes = append([]int{first, n - first}, s.sizes[min(1, len(s.sizes)):]...)
			break
		}
		discard = p.retry(s, n)
	}
	inv.Checkpoint = s.checkpoint
	p.mu.Lock()
	defer p.mu.Unlock()
	p.report.Invocations = append(p.report.Invocations, *inv)
	if discard != nil {
		p.report.Discarded = append(p.report.Discarded, *discard)
	}
	p.report.Checkpoints[s.id] = s.checkpoint
}

// retry counts a failed invocation of the first m records of s's buffer. Once the
// retries exceed MaximumRetryAttempts, the m records are discarded: returned for the
// on-failure destination, and passed by the checkpoint.
func (p *Poller) retry(s *shard, m int) *Discard {
	s.retries++
	if p.cfg.maxRetries < 0 || s.retries <= p.cfg.maxRetries {
		return nil
	}
	seqs := make([]string, m)
	for i, r := range s.buf[:m] {
		seqs[i] = r.SequenceNumber
	}
	d := &Discard{
		Shard:                  s.id,
		Condition:              "RetryAttemptsExhausted",
		StartSequenceNumber:    seqs[0],
		EndSequenceNumber:      seqs[m-1],
		Records:                seqs,
		ApproximateInvokeCount: s.retries,
	}
	s.advance(m)
	s.popSize()
	return d
}

// advance moves the checkpoint past the first k records of the buffer. The record after
// them starts with no retries counted.
func (s *shard) advance(k int) {
	if k == 0 {
		return
	}
	s.checkpoint = s.buf[k-1].SequenceNumber
	s.buf = s.buf[k:]
	s.head, s.retries = "", 0
	if len(s.buf) > 0 {
		s.head = s.buf[0].SequenceNumber
	}
}

// popSize drops the size of the batch just settled, if a bisection set it.
func (s *shard) popSize() {
	if len(s.sizes) > 0 {
		s.sizes = s.sizes[1:]
	}
}

// setSize makes n the size of the next batch.
func (s *shard) setSize(n int) {
	if len(s.sizes) == 0 {
		s.sizes = []int{n}
		return
	}
	s.sizes[0] = n
}
