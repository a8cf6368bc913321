package remote

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/store"
)

// Errors of the transport itself. Errors of the remote store or oracle come
// back as the errors the local implementation returns (store.ErrInvalid via
// *store.InvalidError, store.ErrClosed, oracle.ErrClosed, ...), so callers
// handle both the same way.
var (
	// ErrUnavailable means no service answered: it is not running, it is
	// stopping, the NATS connection is closed or disconnected, or no answer
	// came within the deadline. The request was not executed, or (for a
	// request lost in a disconnect or a timeout) its outcome is unknown. It
	// also matches store.ErrUnavailable, so that code written against any
	// store.Store can tell a store that is gone.
	ErrUnavailable error = unavailableError{}
	// ErrTooLarge means a request or answer cannot be carried at all: it
	// exceeds the memory the service (or, for an answer, the client) may
	// hold for a message in parts (MaxBufferedBytes of ServiceOptions or
	// ClientOptions). Messages larger than the NATS max payload but within
	// that cap travel in parts.
	ErrTooLarge = errors.New("remote: message too large")
	// ErrBusy means the service could not hold a message in parts next to
	// the other transfers in progress (ServiceOptions.MaxBufferedBytes):
	// the caller may retry later. A request refused with it was not
	// executed, except when the error says that its answer was dropped:
	// then it ran, and for Apply its outcome is unknown to the caller, as
	// with a lost request.
	ErrBusy = errors.New("remote: service busy")
	// ErrWrongStore means the service serves another store than the one
	// the client expects (see StoreClient.Expect): the request was refused
	// before it was executed. A client whose connection came back to
	// another deployment's server, or that was pointed at the wrong one,
	// thus never reads or writes there.
	ErrWrongStore = errors.New("remote: the service serves another store")
)

// errNoOracle is a store service's answer to ReadRowsNow, ApplyNow and
// ApplyAtomic when it was started without ServiceOptions.Oracle.
var errNoOracle = fmt.Errorf("remote: the store service has no oracle to draw a read's timestamp from (ServiceOptions.Oracle): %w", errors.ErrUnsupported)

// errNoAtomic is a store service's answer to ApplyAtomic when its store
// cannot write row transactions atomically.
var errNoAtomic = fmt.Errorf("remote: the served store cannot write row transactions atomically: %w", errors.ErrUnsupported)

// unavailableError is ErrUnavailable's type: it matches store.ErrUnavailable
// too.
type unavailableError struct{}

func (unavailableError) Error() string { return "remote: service unavailable" }

// Is makes errors.Is(err, store.ErrUnavailable) true.
func (unavailableError) Is(target error) bool { return target == store.ErrUnavailable }

// RemoteError is an error of the remote side that has no local equivalent:
// its message is carried as text.
type RemoteError struct {
	Op      string // the client operation, e.g. "Apply"
	Code    string // the micro error code
	Message string
}

// Error implements error.
func (e *RemoteError) Error() string {
	return fmt.Sprintf("remote: %s: server error %s: %s", e.Op, e.Code, e.Message)
}

// Micro error codes. They follow HTTP status codes so that generic NATS
// tooling (nats micro stats, nats req) shows something familiar.
const (
	codeInvalid     = "400" // data: encoded *store.InvalidError
	codeClosed      = "410" // the store or oracle behind the service is closed
	codeTooLarge    = "413"
	codeNoTimestamp = "424" // Failed Dependency: the oracle gave no timestamp, nothing was written
	codeTooOld      = "412" // Precondition Failed: a row transaction below the safe point; data: encoded *store.SnapshotError
	codeUnsupported = "501" // the service cannot do what was asked (ReadRowsNow without an oracle)
	codeWrongStore  = "421" // Misdirected Request: the service serves another store
	codeBusy        = "429" // the service's memory for messages in parts is taken
	codeProtocol    = "422" // undecodable request or unknown wire version
	codeCanceled    = "499"
	codeInternal    = "500"
	codeUnavailable = "503" // the service is stopping
	codeTimeout     = "504"
	codeExhausted   = "507" // oracle timestamp space exhausted
)

// errorCode classifies a handler error for the wire. For an InvalidError
// data carries its fields, so the client can rebuild it exactly.
func errorCode(err error) (code string, data []byte) {
	var inv *store.InvalidError
	var old *store.SnapshotError
	switch {
	case errors.As(err, &old):
		e := encoder{}
		e.u8(wireVersion)
		e.str(old.Op)
		e.str(old.Field)
		e.u64(old.Snapshot)
		e.u64(old.SafePoint)
		e.bool(errors.Is(err, store.ErrNoTimestamp))
		return codeTooOld, e.b
	case errors.As(err, &inv):
		e := encoder{}
		e.u8(wireVersion)
		e.str(inv.Op)
		e.str(inv.Field)
		e.str(inv.Reason)
		return codeInvalid, e.b
	case errors.Is(err, oracle.ErrInvalidCount):
		return codeInvalid, nil
	case errors.Is(err, store.ErrNoTimestamp):
		return codeNoTimestamp, nil
	case errors.Is(err, store.ErrClosed), errors.Is(err, oracle.ErrClosed):
		return codeClosed, nil
	case errors.Is(err, oracle.ErrExhausted):
		return codeExhausted, nil
	case errors.Is(err, ErrTooLarge):
		return codeTooLarge, nil
	case errors.Is(err, ErrWrongStore):
		return codeWrongStore, nil
	case errors.Is(err, ErrBusy):
		return codeBusy, nil
	case errors.Is(err, ErrProtocol):
		return codeProtocol, nil
	case errors.Is(err, errors.ErrUnsupported):
		return codeUnsupported, nil
	case errors.Is(err, ErrUnavailable):
		return codeUnavailable, nil
	case errors.Is(err, context.DeadlineExceeded):
		return codeTimeout, nil
	case errors.Is(err, context.Canceled):
		return codeCanceled, nil
	}
	return codeInternal, nil
}

// service tells the client-side error mapping whose sentinel errors to use.
type service uint8

const (
	storeService service = iota
	oracleService
)

// responseError turns a micro error response into the error the local
// implementation would have returned, or nil if msg is not an error.
func responseError(svc service, op string, msg *nats.Msg) error {
	code := msg.Header.Get(micro.ErrorCodeHeader)
	if code == "" {
		return nil
	}
	desc := msg.Header.Get(micro.ErrorHeader)
	// detail is the description without the sentinel's own text, which
	// the returned error wraps anyway.
	detail := func(sentinel error) string { return strings.TrimPrefix(desc, sentinel.Error()+": ") }
	switch code {
	case codeInvalid:
		if svc == oracleService {
			return fmt.Errorf("remote: %s: %w: %s", op, oracle.ErrInvalidCount, detail(oracle.ErrInvalidCount))
		}
		d := newDecoder(msg.Data)
		d.version()
		inv := &store.InvalidError{Op: d.str(), Field: d.str(), Reason: d.str()}
		if d.finish() != nil {
			return &store.InvalidError{Op: op, Field: "request", Reason: desc}
		}
		return inv
	case codeClosed:
		if svc == oracleService {
			return fmt.Errorf("remote: %s: %w", op, oracle.ErrClosed)
		}
		return fmt.Errorf("remote: %s: %w", op, store.ErrClosed)
	case codeExhausted:
		return fmt.Errorf("remote: %s: %w: %s", op, oracle.ErrExhausted, detail(oracle.ErrExhausted))
	case codeTooLarge:
		return fmt.Errorf("remote: %s: %w: %s", op, ErrTooLarge, detail(ErrTooLarge))
	case codeNoTimestamp:
		return fmt.Errorf("remote: %s: server: %w: %s", op, store.ErrNoTimestamp, desc)
	case codeTooOld:
		d := newDecoder(msg.Data)
		d.version()
		old := &store.SnapshotError{Op: d.str(), Field: d.str(), Snapshot: d.u64(), SafePoint: d.u64()}
		noTimestamp := d.bool()
		if d.finish() != nil {
			return fmt.Errorf("remote: %s: server: %w: %s", op, store.ErrSnapshotTooOld, desc)
		}
		if noTimestamp {
			return fmt.Errorf("remote: %s: server: %w: %w", op, store.ErrNoTimestamp, old)
		}
		return fmt.Errorf("remote: %s: server: %w", op, old)
	case codeWrongStore:
		return fmt.Errorf("remote: %s: %w: %s", op, ErrWrongStore, detail(ErrWrongStore))
	case codeBusy:
		return fmt.Errorf("remote: %s: %w: %s", op, ErrBusy, detail(ErrBusy))
	case codeProtocol:
		return fmt.Errorf("remote: %s: server: %w: %s", op, ErrProtocol, detail(ErrProtocol))
	case codeUnavailable:
		return fmt.Errorf("remote: %s: %w: %s", op, ErrUnavailable, detail(ErrUnavailable))
	case codeUnsupported:
		return fmt.Errorf("remote: %s: server: %s: %w", op, strings.TrimSuffix(desc, ": "+errors.ErrUnsupported.Error()), errors.ErrUnsupported)
	case codeTimeout:
		return fmt.Errorf("remote: %s: server gave up: %w", op, context.DeadlineExceeded)
	case codeCanceled:
		return fmt.Errorf("remote: %s: server: %w", op, context.Canceled)
	}
	return &RemoteError{Op: op, Code: code, Message: desc}
}

// transportError wraps an error of nc.Request so that callers can tell an
// absent service (ErrUnavailable) and an oversized message (ErrTooLarge,
// which the parts protocol should make impossible) apart; context errors
// stay matchable with errors.Is.
func transportError(op string, err error) error {
	switch {
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrConnectionClosed),
		errors.Is(err, nats.ErrDisconnected), errors.Is(err, nats.ErrConnectionDraining),
		errors.Is(err, nats.ErrInvalidConnection), errors.Is(err, nats.ErrBadSubscription):
		return fmt.Errorf("remote: %s: %w: %w", op, ErrUnavailable, err)
	case errors.Is(err, nats.ErrMaxPayload):
		return fmt.Errorf("remote: %s: %w: %w", op, ErrTooLarge, err)
	}
	return fmt.Errorf("remote: %s: %w", op, err)
}
