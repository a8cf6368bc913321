package export

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// compactor publishes entries to a stream that keeps the last message of
// each subject, one subject per key, so that a subject's HeaderSeq never
// goes down: an entry is published with the stream sequence of the
// subject's last message as the expected one
// (Nats-Expected-Last-Subject-Sequence), and a publish the stream refuses
// because another message got there first is resolved by reading that
// message: if it carries a higher or equal sequence number the entry is
// stale and dropped, else the entry is published again expecting it.
// Publishes are pipelined, so one key's entries of a batch collapse into
// the last (the only one a compacted subject would keep).
type compactor struct {
	js      jetstream.JetStream
	stream  jetstream.Stream
	name    string // the stream's name, for messages
	timeout time.Duration
	window  int
	// tombstoneAge is the Nats-TTL of tombstones; 0 keeps them.
	tombstoneAge time.Duration
	// subject and message make an entry's subject and message.
	subject func(queue string, key []byte) string
	message func(subject, queue string, e Entry) *nats.Msg

	// last is, per subject, the last message the compactor knows of: a
	// cache saving the first publish of a known key a lookup; the stream's
	// check makes a stale one harmless. At most cacheMax subjects.
	mu       sync.Mutex
	last     map[string]lastMsg
	cacheMax int

	stale, conflicts atomic.Uint64
	// fault, if set (tests), is called before publishing the i-th
	// message of a round: an error fails the batch there.
	fault func(i int) error
}

// lastMsg is a subject's last message: its stream sequence and the
// entry's sequence number it carries.
type lastMsg struct{ stream, seq uint64 }

// maxRounds bounds how often one batch resolves conflicts: each round
// loses only to a newer publish of the same key by another process.
const maxRounds = 8

// lookups is how many subjects a round of conflicts looks up at once.
const lookups = 16

// pending is an entry on its way: its subject and the stream sequence
// its publish expects the subject's last message to have.
type pending struct {
	e       Entry
	subject string
	expect  uint64
	known   bool // expect comes from a lookup, not the cache
}

func (c *compactor) cached(subject string) (lastMsg, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.last[subject]
	return l, ok
}

// remember records subject's last message, keeping the higher entry
// sequence number the compactor knew of.
func (c *compactor) remember(subject string, l lastMsg) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.last[subject]; ok && old.seq > l.seq {
		l.seq = old.seq
	}
	if _, ok := c.last[subject]; !ok && len(c.last) >= c.cacheMax {
		n := 0
		for k := range c.last { // forget a random eighth
			delete(c.last, k)
			if n++; n >= max(1, c.cacheMax/8) {
				break
			}
		}
	}
	c.last[subject] = l
}

// export publishes the latest entry of each key of entries, within the
// timeout, and returns once every one is stored or found stale.
func (c *compactor) export(ctx context.Context, queue string, entries []Entry) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	round := make([]pending, 0, len(entries))
	at := map[string]int{}
	for _, e := range entries {
		if i, ok := at[string(e.Key)]; ok {
			if e.Seq > round[i].e.Seq {
				round[i].e = e
			}
			continue
		}
		at[string(e.Key)] = len(round)
		round = append(round, pending{e: e, subject: c.subject(queue, e.Key)})
	}
	for n := 0; len(round) > 0; n++ {
		if n == maxRounds {
			return fmt.Errorf("stream %s: %d entries from %s still lost to newer publishes after %d rounds", c.name, len(round), round[0].e, maxRounds)
		}
		conflicted, err := c.publish(ctx, queue, round)
		if err != nil {
			return err
		}
		if round, err = c.resolve(ctx, conflicted); err != nil {
			return err
		}
	}
	return nil
}

// publish publishes round, pipelined, and returns the entries the stream
// refused because the subject's last message was not the expected one.
func (c *compactor) publish(ctx context.Context, queue string, round []pending) ([]pending, error) {
	var conflicted []pending
	futures := make([]jetstream.PubAckFuture, 0, min(len(round), c.window))
	of := make([]int, 0, cap(futures))
	wait := func() error {
		f, i := futures[0], of[0]
		futures, of = futures[1:], of[1:]
		p := round[i]
		select {
		case ack := <-f.Ok():
			c.remember(p.subject, lastMsg{stream: ack.Sequence, seq: p.e.Seq})
			return nil
		case err := <-f.Err():
			if wrongLast(err) {
				c.conflicts.Add(1)
				conflicted = append(conflicted, p)
				return nil
			}
			return fmt.Errorf("stream %s, subject %s, entry %s: %w", c.name, p.subject, p.e, err)
		case <-ctx.Done():
			return fmt.Errorf("stream %s, subject %s: no acknowledgement of entry %s within %v: %w", c.name, p.subject, p.e, c.timeout, context.Cause(ctx))
		}
	}
	for i := range round {
		p := &round[i]
		if !p.known {
			if l, ok := c.cached(p.subject); ok {
				if l.seq >= p.e.Seq {
					c.stale.Add(1)
					continue
				}
				p.expect = l.stream
			}
		}
		if len(futures) == c.window {
			if err := wait(); err != nil {
				return nil, err
			}
		}
		if c.fault != nil {
			if err := c.fault(i); err != nil {
				return nil, fmt.Errorf("stream %s, subject %s, entry %s: %w", c.name, p.subject, p.e, err)
			}
		}
		// No message id: an entry sent twice fails the expected sequence
		// and is found stale, and every header is stored with the message.
		opts := []jetstream.PublishOpt{jetstream.WithExpectLastSequencePerSubject(p.expect)}
		if p.e.Delete && c.tombstoneAge > 0 {
			opts = append(opts, jetstream.WithMsgTTL(c.tombstoneAge))
		}
		f, err := c.js.PublishMsgAsync(c.message(p.subject, queue, p.e), opts...)
		if err != nil {
			return nil, fmt.Errorf("stream %s, subject %s, entry %s: %w", c.name, p.subject, p.e, err)
		}
		futures, of = append(futures, f), append(of, i)
	}
	for len(futures) > 0 {
		if err := wait(); err != nil {
			return nil, err
		}
	}
	return conflicted, nil
}

// wrongLast reports whether err is the stream refusing a publish whose
// expected last subject sequence was not the subject's.
func wrongLast(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && (api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// resolve reads the last message of each conflicted subject and returns
// the entries still newer than it, to publish again expecting it.
func (c *compactor) resolve(ctx context.Context, conflicted []pending) ([]pending, error) {
	if len(conflicted) == 0 {
		return nil, nil
	}
	var (
		wg    sync.WaitGroup
		sem   = make(chan struct{}, lookups)
		errs  = make([]error, len(conflicted))
		again = make([]bool, len(conflicted))
	)
	for i := range conflicted {
		p := &conflicted[i]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			l, err := c.lookup(ctx, p.subject)
			if err != nil {
				errs[i] = err
				return
			}
			if prior, ok := c.cached(p.subject); ok && prior.seq > l.seq {
				l.seq = prior.seq // the subject held it once: an expired tombstone
			}
			c.remember(p.subject, l)
			if l.seq >= p.e.Seq {
				c.stale.Add(1)
				return
			}
			p.expect, p.known, again[i] = l.stream, true, true
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var next []pending
	for i, p := range conflicted {
		if again[i] {
			next = append(next, p)
		}
	}
	return next, nil
}

// lookup reads subject's last message: zero if it has none.
func (c *compactor) lookup(ctx context.Context, subject string) (lastMsg, error) {
	m, err := c.stream.GetLastMsgForSubject(ctx, subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return lastMsg{}, nil
	case err != nil:
		return lastMsg{}, fmt.Errorf("stream %s: reading the last message of %s: %w", c.name, subject, err)
	}
	seq, _ := strconv.ParseUint(m.Header.Get(HeaderSeq), 10, 64) // none (a foreign write): any entry is newer
	return lastMsg{stream: m.Sequence, seq: seq}, nil
}
