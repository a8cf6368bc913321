// Package tikvcall is how this module's code calls a TiKV cluster through
// client-go, the same way in the store over TiKV (store/tikv) and the
// engine whose transactions are TiKV's own (internal/tikvengine): requests
// that end with their caller's context, and the reading of client-go's
// errors (unreachable, outcome unknown).
package tikvcall

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	tikverr "github.com/tikv/client-go/v2/error"
	"github.com/tikv/client-go/v2/kv"
	"github.com/tikv/client-go/v2/tikvrpc"
	"github.com/tikv/client-go/v2/tikvrpc/interceptor"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Watched is what Watch needs of a client-go snapshot or transaction.
type Watched interface {
	SetVars(*kv.Variables)
	AddRPCInterceptor(interceptor.RPCInterceptor)
}

// Watch makes w's requests give up once ctx ends: its retries at their
// next backoff (the kill flag), and a scan request in flight at once.
// client-go's scans do not pass their caller's context to their requests,
// so without the latter a scan of a slow or stalled cluster would keep its
// caller up to the client's own request timeout past its deadline. The
// returned function stops watching. Once ctx ended, the client reports an
// interrupted query: callers report ctx's error instead (see Undetermined
// for the one exception).
func Watch(ctx context.Context, w Watched) (stop func() bool) {
	killed := new(uint32)
	w.SetVars(kv.NewVariables(killed))
	w.AddRPCInterceptor(scansWithin(ctx))
	return context.AfterFunc(ctx, func() { atomic.StoreUint32(killed, 1) })
}

// scansWithin ends a scan request when ctx ends, leaving the request to
// finish or time out on its own (its goroutine ends with it). The
// abandoned request is a copy: client-go reads its request again once
// the call returned (its metrics, a retry) while the client sending it
// may still be writing the request's context into it. The error is
// context.Canceled whatever ended ctx: client-go takes any other error of
// a request (a deadline included) for a store that failed to answer, and
// stops sending to the store until it answers a health check (which
// client-go's mock never does); callers report ctx's own error.
func scansWithin(ctx context.Context) interceptor.RPCInterceptor {
	return interceptor.NewRPCInterceptor("trickle-scan-deadline", func(next interceptor.RPCInterceptorFunc) interceptor.RPCInterceptorFunc {
		return func(target string, req *tikvrpc.Request) (*tikvrpc.Response, error) {
			if req.Type != tikvrpc.CmdScan || ctx.Done() == nil {
				return next(target, req)
			}
			if ctx.Err() != nil {
				return nil, context.Canceled
			}
			type answer struct {
				resp *tikvrpc.Response
				err  error
			}
			sent := *req
			scan := *req.Scan()
			sent.Req = &scan
			done := make(chan answer, 1)
			go func() {
				resp, err := next(target, &sent)
				done <- answer{resp, err}
			}()
			select {
			case a := <-done:
				return a.resp, a.err
			case <-ctx.Done():
				return nil, context.Canceled
			}
		}
	})
}

// Undetermined reports whether err says a commit may or may not have
// happened: the caller must learn that, whatever else ended the request.
func Undetermined(err error) bool {
	return tikverr.IsErrorUndetermined(err) || errors.Is(err, tikverr.ErrResultUndetermined)
}

// Unreachable reports whether err says that PD or TiKV did not answer.
func Unreachable(err error) bool {
	for _, e := range []error{tikverr.ErrTiKVServerTimeout, tikverr.ErrRegionUnavailable, tikverr.ErrTiKVServerBusy,
		tikverr.ErrTiKVStaleCommand, tikverr.ErrTiKVMaxTimestampNotSynced} {
		if errors.Is(err, e) {
			return true
		}
	}
	var pde *tikverr.PDError
	var pdt *tikverr.ErrPDServerTimeout
	if errors.As(err, &pde) || errors.As(err, &pdt) {
		return true
	}
	switch status.Code(errors.Unwrap(err)) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// valueTag leads every value written: TiKV refuses empty values, and an
// empty cell value is a value.
const valueTag = 0x01

// Frame returns the stored form of a value.
func Frame(v []byte) []byte {
	out := make([]byte, 1+len(v))
	out[0] = valueTag
	copy(out[1:], v)
	return out
}

// AppendFrame appends the stored form of v to dst, for writers that
// build many values in one buffer (an import's batches).
func AppendFrame(dst, v []byte) []byte {
	return append(append(dst, valueTag), v...)
}

// Unframe returns the value of the stored one v of key (aliasing v), or
// an error wrapping corrupt (the caller's error for damaged data) if v was
// not written by Frame.
func Unframe(key, v []byte, corrupt error) ([]byte, error) {
	if len(v) == 0 || v[0] != valueTag {
		return nil, fmt.Errorf("%w: value of %x has no value tag", corrupt, key)
	}
	return v[1:], nil
}
