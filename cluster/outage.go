package cluster

import "time"

// outage follows a run of failures of a periodic task (a liveness
// refresh), so that the task reports it when it starts, reminds at most
// once per remind interval while it lasts, and reports when it ends,
// instead of warning at every attempt (every few seconds for as long as
// NATS is away).
type outage struct {
	failures     int
	since, shown time.Time
}

// fail records a failure at now and reports whether to warn about it: the
// first of a run, then one per remind.
func (o *outage) fail(now time.Time, remind time.Duration) bool {
	o.failures++
	if o.failures == 1 {
		o.since = now
	} else if now.Sub(o.shown) < remind {
		return false
	}
	o.shown = now
	return true
}

// ok records a success at now; if it ends a run of failures, it returns
// how many there were and how long the run lasted (0 failures otherwise).
func (o *outage) ok(now time.Time) (failures int, lasted time.Duration) {
	if o.failures == 0 {
		return 0, 0
	}
	failures, lasted = o.failures, now.Sub(o.since)
	*o = outage{}
	return failures, lasted
}
