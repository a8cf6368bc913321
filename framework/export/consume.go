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
	// Consume returns once it has read every message the stream held when
	// it began. Default: false.
	Follow bool
	// FetchWait bounds each wait for the next message; without Follow,
	// a wait that brings none ends the reading (the rest of the stream
	// matched no filter). Default: 5s.
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

// Consume reads a JetStreamSink's stream from its first message, in
// order, and calls apply with each entry and its queue; it returns how
// many it read. A consumer that applies every entry to a Table (or keeps
// the same contract in its own store) ends with the exported table,
// whatever re-deliveries the stream holds. It reads with an ordered,
// ephemeral consumer, so it leaves nothing behind on the server. An
// error from apply stops it; a message that is not an export entry is an
// error wrapping ErrCorrupt naming its stream sequence.
func Consume(ctx context.Context, nc *nats.Conn, opts ConsumeOptions, apply func(queue string, e Entry) error) (int, error) {
	opts.EnsureDefaults()
	if opts.FetchWait < 0 {
		return 0, fmt.Errorf("%w: FetchWait %v must not be negative", ErrInvalidOptions, opts.FetchWait)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, fmt.Errorf("export: JetStream: %w", err)
	}
	lookup, cancel := context.WithTimeout(ctx, opts.FetchWait)
	st, err := js.Stream(lookup, opts.Stream)
	cancel()
	if err != nil {
		return 0, fmt.Errorf("export: stream %s on %s: %w", opts.Stream, nc.ConnectedUrlRedacted(), err)
	}
	if st.CachedInfo().State.Msgs == 0 && !opts.Follow {
		return 0, nil
	}
	filter := opts.Subject + ".>"
	if opts.Queue != "" {
		filter = opts.Subject + "." + opts.Queue
	}
	cons, err := js.OrderedConsumer(ctx, opts.Stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		return 0, fmt.Errorf("export: reading stream %s (%s): %w", opts.Stream, filter, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return 0, fmt.Errorf("export: reading stream %s (%s): %w", opts.Stream, filter, err)
	}
	defer it.Stop()
	n := 0
	for {
		wait, cancel := context.WithTimeout(ctx, opts.FetchWait)
		m, err := it.Next(jetstream.NextContext(wait))
		cancel()
		switch {
		case err != nil && ctx.Err() != nil:
			return n, ctx.Err()
		case (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)) && !opts.Follow:
			return n, nil // nothing more came: the filter matched no later message
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
			continue
		case err != nil:
			return n, fmt.Errorf("export: reading stream %s (%s): %w", opts.Stream, filter, err)
		}
		meta, err := m.Metadata()
		if err != nil {
			return n, fmt.Errorf("export: stream %s: %w", opts.Stream, err)
		}
		queue, e, err := DecodeMessage(m.Headers(), m.Data())
		if err != nil {
			return n, fmt.Errorf("export: stream %s, message %d: %w", opts.Stream, meta.Sequence.Stream, err)
		}
		if err := apply(queue, e); err != nil {
			return n, err
		}
		n++
		if !opts.Follow && meta.NumPending == 0 {
			return n, nil
		}
	}
}
