package runner

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
)

// Run returns only once the loops it started (collections, the standby
// that takes the directory over, the HTTP server) have ended, so that
// Close never releases the node under one of them: a takeover finishing
// after Close would open an owner nobody closes, a collection would call
// a closed store.
func TestRunWaitsForItsLoopsBeforeReturning(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r, err := Start(ctx, Config{Deployment: Deployment{DataDir: t.TempDir(), NATSPort: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, HTTPAddr: "off"}, framework.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var ended atomic.Bool
	started := make(chan struct{})
	r.spawn(func() {
		close(started)
		// A round that was under way when Run was told to stop.
		time.Sleep(100 * time.Millisecond)
		ended.Store(true)
	})
	<-started
	cancel()
	if err := r.Run(ctx); err != nil && ctx.Err() == nil {
		t.Fatal(err)
	}
	if !ended.Load() {
		t.Fatal("Run returned while a loop it started was still running")
	}
}
