package export

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// migrateChunk is how many entries migrate publishes per round.
const migrateChunk = 1000

// migrate moves what a sink of an earlier release published into the
// compacted form, once: that sink put every entry of queue Q on the
// subject Subject.Q, keyed by its header, and the stream kept them all.
// For each such subject, migrate reads it through, publishes each key's
// latest entry on the key's subject (through the compactor, so an entry
// the new form holds newer stays), and purges the old subject. It runs
// before the stream gets its per-subject limit, which would otherwise
// keep only the old subject's last entry. A process that dies half-way
// leaves the old subject in place, and the next sink to start migrates
// it again, harmlessly.
func (s *JetStreamSink) migrate(ctx context.Context) error {
	look, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	info, err := s.c.stream.Info(look, jetstream.WithSubjectFilter(s.opts.Subject+".*"))
	cancel()
	if err != nil {
		return fmt.Errorf("export: stream %s: listing the subjects of an earlier release: %w", s.opts.Stream, err)
	}
	for _, subject := range slices.Sorted(maps.Keys(info.State.Subjects)) {
		began := time.Now()
		tables := map[string]*Table{}
		r := reader{js: s.js, st: s.c.stream, stream: s.opts.Stream, filter: subject, deliver: jetstream.DeliverAllPolicy, wait: s.opts.Timeout}
		read, err := r.read(ctx, func(queue string, e Entry) error {
			t := tables[queue]
			if t == nil {
				t = NewTable()
				tables[queue] = t
			}
			t.Apply(e)
			return nil
		})
		if err != nil {
			return fmt.Errorf("export: moving %s into the compacted form: %w", subject, err)
		}
		keys := 0
		for queue, t := range tables {
			entries := t.Entries()
			keys += len(entries)
			for i := 0; i < len(entries); i += migrateChunk {
				if err := s.c.export(ctx, queue, entries[i:min(i+migrateChunk, len(entries))]); err != nil {
					return fmt.Errorf("export: moving %s into the compacted form: %w", subject, err)
				}
			}
		}
		purge, cancel := context.WithTimeout(ctx, s.opts.Timeout)
		err = s.c.stream.Purge(purge, jetstream.WithPurgeSubject(subject))
		cancel()
		if err != nil {
			return fmt.Errorf("export: stream %s: purging %s once moved: %w", s.opts.Stream, subject, err)
		}
		s.opts.Logger.Info("export: moved an earlier release's subject into the compacted form",
			"stream", s.opts.Stream, "subject", subject, "messages", read, "keys", keys, "took", time.Since(began).Round(time.Millisecond))
	}
	return nil
}
