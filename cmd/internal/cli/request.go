package cli

import (
	"github.com/trickle-dev/trickle/remote"
	"github.com/trickle-dev/trickle/runner"
)

// RequestVars defines the flags of a process's requests over NATS on f,
// with their variables: -request-timeout (TRICKLE_REQUEST_TIMEOUT) and
// -min-transfer-rate (TRICKLE_MIN_TRANSFER_RATE), which a slow link needs
// lowered (see runner.Deployment).
func (f *Flags) RequestVars(d *runner.Deployment) {
	f.DurationVar(&d.RequestTimeout, "request-timeout", remote.DefaultRequestTimeout, "how long a request to the store or oracle, or a part of a large one, waits for its answer")
	f.Env("request-timeout", "TRICKLE_REQUEST_TIMEOUT")
	f.SizeVar(&d.MinTransferRate, "min-transfer-rate", remote.DefaultMinTransferRate, "bytes per second (k, m, g suffixes) a request too large for one NATS message is given time for, on top of -request-timeout")
	f.Env("min-transfer-rate", "TRICKLE_MIN_TRANSFER_RATE")
}
