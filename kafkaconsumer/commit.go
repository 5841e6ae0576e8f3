package kafkaconsumer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// span is what one batch holds of one partition.
type span struct {
	first     int64 // the lowest offset in the batch
	next      kgo.EpochOffset
	failed    bool
	failEpoch int32
	failAt    int64 // the first failure's offset
}

// commit commits, per partition of the batch, the offset of its first failed record, or
// the one after its last record if none failed, with the offsets acknowledged before but
// not yet committed; and rewinds each partition with a failure to it, so that it is
// consumed again from there.
func (c *Consumer) commit(ctx context.Context, recs []*kgo.Record, rep *Report) error {
	spans := make(map[partition]*span)
	for i, r := range recs {
		p := partition{r.Topic, r.Partition}
		s := spans[p]
		if s == nil {
			s = &span{first: r.Offset}
			spans[p] = s
		}
		s.first = min(s.first, r.Offset)
		if rep.Outcomes[i].Failed() {
			if !s.failed || r.Offset < s.failAt {
				s.failed, s.failAt, s.failEpoch = true, r.Offset, r.LeaderEpoch
			}
			continue
		}
		if r.Offset+1 > s.next.Offset {
			s.next = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
		}
	}
	rewind := make(map[string]map[int32]kgo.EpochOffset)
	c.mu.Lock()
	for p, s := range spans {
		next := s.next
		if s.failed {
			next = kgo.EpochOffset{Epoch: s.failEpoch, Offset: s.failAt}
			if rewind[p.topic] == nil {
				rewind[p.topic] = make(map[int32]kgo.EpochOffset)
			}
			// The epoch is cleared: the position is ours, not a fetched one to check.
			rewind[p.topic][p.id] = kgo.EpochOffset{Epoch: -1, Offset: s.failAt}
			rep.Retried = append(rep.Retried, Offset{Topic: p.topic, Partition: p.id, Offset: s.failAt})
		}
		if next.Offset > s.first {
			c.acked[p] = next
		}
	}
	toCommit := maps.Clone(c.acked)
	c.mu.Unlock()
	slices.SortFunc(rep.Retried, compareOffsets)
	// Rewinding before AllowRebalance keeps it from racing a revocation.
	c.client.SetOffsets(rewind)
	if len(toCommit) == 0 {
		return nil
	}
	if err := c.commitOffsets(ctx, toCommit); err != nil {
		return err
	}
	c.mu.Lock()
	for p, o := range toCommit {
		if c.acked[p] == o {
			delete(c.acked, p)
		}
		rep.Committed = append(rep.Committed, Offset{Topic: p.topic, Partition: p.id, Offset: o.Offset})
	}
	c.mu.Unlock()
	slices.SortFunc(rep.Committed, compareOffsets)
	return nil
}

// commitOffsets commits offsets synchronously, under a context that outlives ctx's end (a
// shutdown still commits what finished) but no longer than the commit timeout.
func (c *Consumer) commitOffsets(ctx context.Context, offsets map[partition]kgo.EpochOffset) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.commitTime)
	defer cancel()
	m := make(map[string]map[int32]kgo.EpochOffset)
	for p, o := range offsets {
		if m[p.topic] == nil {
			m[p.topic] = make(map[int32]kgo.EpochOffset)
		}
		m[p.topic][p.id] = o
	}
	var rerr error
	c.client.CommitOffsetsSync(ctx, m, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			rerr = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					rerr = errors.Join(rerr, fmt.Errorf("%s-%d: %w", t.Topic, p.Partition, err))
				}
			}
		}
	})
	if rerr != nil {
		return fmt.Errorf("%w: %w", ErrCommit, rerr)
	}
	return nil
}

// onRevoked commits the offsets acknowledged in revoked partitions and not yet committed.
// It runs between batches (BlockRebalanceOnPoll): every record polled from them has
// finished, and its outcome is recorded or its claim released.
func (c *Consumer) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	offsets := c.take(revoked)
	if len(offsets) == 0 {
		return
	}
	if err := c.commitOffsets(ctx, offsets); err != nil {
		// The partitions' next owner consumes them from the last commit, and replays from
		// the store what finished here.
		c.logger.WarnContext(ctx, "kafkaconsumer: commit on revoke failed", "error", err)
	}
}

// onLost drops the offsets acknowledged in lost partitions: another member owns them, and
// replays from the store what finished here.
func (c *Consumer) onLost(ctx context.Context, _ *kgo.Client, lost map[string][]int32) {
	if n := len(c.take(lost)); n > 0 {
		c.logger.WarnContext(ctx, "kafkaconsumer: partitions lost before their offsets were committed", "partitions", n)
	}
}

// take removes and returns the acknowledged offsets of the partitions in tps.
func (c *Consumer) take(tps map[string][]int32) map[partition]kgo.EpochOffset {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[partition]kgo.EpochOffset)
	for topic, ids := range tps {
		for _, id := range ids {
			p := partition{topic, id}
			if o, ok := c.acked[p]; ok {
				out[p] = o
				delete(c.acked, p)
			}
		}
	}
	return out
}

func compareOffsets(a, b Offset) int {
	if a.Topic != b.Topic {
		if a.Topic < b.Topic {
			return -1
		}
		return 1
	}
	return int(a.Partition - b.Partition)
}
