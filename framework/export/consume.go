package export

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ConsumeOptions configure Consume. EnsureDefaults fills unset fields.
type ConsumeOptions struct {
	// Stream and Subject are the JetStreamSink's (JetStreamOptions).
	// Defaults: "TRICKLE_EXPORT" and "trickle.export".
	Stream, Subject string
	// Queue, if set, reads only that queue's subject. Default: every
	// queue's.
	Queue string
	// Follow keeps reading new messages until ctx ends. Without it,
	// Consume returns once it has read the last message of every subject
	// the stream held when it began (or a newer one). Default: false.
	Follow bool
	// CaughtUp, if set, is called once, with Follow, when the reading
	// has caught up with the stream: the entries applied so far are the
	// table as the stream held it when the reading began, or newer.
	CaughtUp func()
	// FetchWait bounds each wait for the next message, and each lookup.
	// Default: 5s.
	FetchWait time.Duration
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *ConsumeOptions) EnsureDefaults() *ConsumeOptions {
	if o.Stream == "" {
		o.Stream = "TRICKLE_EXPORT"
	}
	if o.Subject == "" {
		o.Subject = "trickle.export"
	}
	if o.FetchWait == 0 {
		o.FetchWait = 5 * time.Second
	}
	return o
}

// Consume reads the table a JetStreamSink's stream holds and calls apply
// with each entry and its queue; it returns how many it read. It reads
// the last message of each key's subject (DeliverLastPerSubject), which
// is the key's latest exported entry or its tombstone (see JetStreamSink
// for what a consumer starting at any moment sees), and with Follow then
// every later message as it comes. Entries a sink of an earlier release
// left on a queue's own subject, not moved yet, are read first, all of
// them. A consumer that applies every entry to a Table (or keeps the same
// contract in its own store) ends with the exported table. It reads with
// ordered, ephemeral consumers, so it leaves nothing behind on the
// server. An error from apply stops it; a message that is not an export
// entry is an error wrapping ErrCorrupt naming its stream sequence.
func Consume(ctx context.Context, nc *nats.Conn, opts ConsumeOptions, apply func(queue string, e Entry) error) (int, error) {
	opts.EnsureDefaults()
	if opts.FetchWait < 0 {
		return 0, fmt.Errorf("%w: FetchWait %v must not be negative", ErrInvalidOptions, opts.FetchWait)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, fmt.Errorf("export: JetStream: %w", err)
	}
	queue := "*"
	if opts.Queue != "" {
		queue = opts.Queue
	}
	lookup, cancel := context.WithTimeout(ctx, opts.FetchWait)
	st, err := js.Stream(lookup, opts.Stream)
	var old *jetstream.StreamInfo
	if err == nil {
		old, err = st.Info(lookup, jetstream.WithSubjectFilter(opts.Subject+"."+queue))
	}
	cancel()
	if err != nil {
		return 0, fmt.Errorf("export: stream %s on %s: %w", opts.Stream, nc.ConnectedUrlRedacted(), err)
	}
	n := 0
	if len(old.State.Subjects) > 0 {
		r := reader{js: js, st: st, stream: opts.Stream, filter: opts.Subject + "." + queue, deliver: jetstream.DeliverAllPolicy, wait: opts.FetchWait}
		if n, err = r.read(ctx, apply); err != nil {
			return n, err
		}
	}
	r := reader{js: js, st: st, stream: opts.Stream, filter: opts.Subject + "." + queue + ".>", deliver: jetstream.DeliverLastPerSubjectPolicy,
		wait: opts.FetchWait, follow: opts.Follow, caughtUp: opts.CaughtUp}
	m, err := r.read(ctx, apply)
	return n + m, err
}

// reader reads a stream's messages on a filter with an ordered consumer.
type reader struct {
	js      jetstream.JetStream
	st      jetstream.Stream
	stream  string
	filter  string
	deliver jetstream.DeliverPolicy
	wait    time.Duration
	// follow keeps reading until ctx ends; without it, reading ends once
	// caught up (see read).
	follow bool
	// caughtUp, if set, is called once a following reader caught up.
	caughtUp func()
}

func (r reader) read(ctx context.Context, apply func(queue string, e Entry) error) (int, error) {
	cons, err := r.js.OrderedConsumer(ctx, r.stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{r.filter}, DeliverPolicy: r.deliver})
	if err != nil {
		return 0, fmt.Errorf("export: reading stream %s (%s): %w", r.stream, r.filter, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(4096))
	if err != nil {
		return 0, fmt.Errorf("export: reading stream %s (%s): %w", r.stream, r.filter, err)
	}
	defer it.Stop()
	// Reading has caught up once it reached the filter's last message,
	// asked again when reached: the consumer's count of pending messages
	// may reach zero early while keys change under a last-per-subject
	// delivery, and a key whose last message was replaced before the
	// reading reached it is found at its new place only, after the last
	// message it began with. Without follow, reading ends there.
	catching := !r.follow || r.caughtUp != nil
	var upTo, seen uint64
	caught := func() bool {
		if !r.follow {
			return true
		}
		r.caughtUp()
		catching = false
		return false
	}
	if catching {
		if upTo, err = r.lastSeq(ctx); err != nil {
			return 0, err
		}
		if upTo == 0 && caught() {
			return 0, nil
		}
	}
	n := 0
	for {
		wait, cancel := context.WithTimeout(ctx, r.wait)
		m, err := it.Next(jetstream.NextContext(wait))
		cancel()
		switch {
		case err != nil && ctx.Err() != nil:
			return n, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
			// Nothing came: the last message was removed meanwhile (an
			// expired tombstone), or there is nothing new to follow.
			if catching {
				if upTo, err = r.lastSeq(ctx); err != nil {
					return n, err
				}
				if upTo <= seen && caught() {
					return n, nil
				}
			}
			continue
		case err != nil:
			return n, fmt.Errorf("export: reading stream %s (%s): %w", r.stream, r.filter, err)
		}
		meta, err := m.Metadata()
		if err != nil {
			return n, fmt.Errorf("export: stream %s: %w", r.stream, err)
		}
		queue, e, err := DecodeSubjectMessage(m.Subject(), m.Headers(), m.Data())
		if err != nil {
			return n, fmt.Errorf("export: stream %s, message %d: %w", r.stream, meta.Sequence.Stream, err)
		}
		if err := apply(queue, e); err != nil {
			return n, err
		}
		n++
		seen = meta.Sequence.Stream
		if catching && seen >= upTo {
			if upTo, err = r.lastSeq(ctx); err != nil {
				return n, err
			}
			if upTo <= seen && caught() {
				return n, nil
			}
		}
	}
}

// lastSeq returns the stream sequence of the filter's last message, 0 if
// it matches none.
func (r reader) lastSeq(ctx context.Context) (uint64, error) {
	look, cancel := context.WithTimeout(ctx, r.wait)
	defer cancel()
	last, err := r.st.GetLastMsgForSubject(look, r.filter)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("export: stream %s: the last message of %s: %w", r.stream, r.filter, err)
	}
	return last.Sequence, nil
}
