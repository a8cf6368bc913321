package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	tikvclient "github.com/tikv/client-go/v2/tikv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/tikv"
)

// TiKVScheme starts a Deployment.Store that names a TiKV cluster:
// tikv://pd1:2379,pd2:2379 lists the cluster's PD endpoints.
const TiKVScheme = "tikv://"

// ErrNATSRequired is returned by Open for a deployment on a TiKV store
// without a NATS URL. With TiKV no process owns the store, so there is no
// owner to start an embedded NATS server for the others, and every process
// must find the same one: liveness, advisory row locks and wake-ups run on
// it.
var ErrNATSRequired = errors.New("runner: a TiKV store needs an external NATS server")

// TiKVOptions are the settings of a deployment on a TiKV store that the
// store's URL does not carry.
type TiKVOptions struct {
	// CAPath, CertPath and KeyPath name PEM files for TLS to PD and TiKV:
	// the CA of the cluster and this process's certificate and key. All
	// three or none. Default: none (plaintext).
	CAPath, CertPath, KeyPath string
	// Metrics, if set, is where the TiKV client's prometheus metrics are
	// registered (they are process-wide). Runners set it when they serve
	// /metrics. Default: nil, not registered.
	Metrics prometheus.Registerer
	// Client, if set, is an open TiKV client used instead of connecting to
	// the PD endpoints of Deployment.Store (which must still name a TiKV
	// store): tests pass client-go's in-process mock cluster. The node
	// does not close it. Default: nil.
	Client *tikvclient.KVStore
}

// ParseStoreURL returns the PD endpoints (host:port) a store URL names,
// and ok false for the empty URL, which means the embedded pebble store in
// the data directory. Anything else is an error saying what is wrong.
func ParseStoreURL(s string) (pd []string, ok bool, err error) {
	if s == "" {
		return nil, false, nil
	}
	rest, found := strings.CutPrefix(s, TiKVScheme)
	if !found {
		return nil, false, fmt.Errorf("store %q: want tikv://PD-HOST:PORT[,PD-HOST:PORT...], or nothing for the embedded store in the data directory", s)
	}
	rest = strings.TrimSuffix(rest, "/")
	if rest == "" {
		return nil, false, fmt.Errorf("store %q names no PD endpoint: want tikv://PD-HOST:PORT[,PD-HOST:PORT...]", s)
	}
	for _, a := range strings.Split(rest, ",") {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || strings.ContainsAny(host, "/?#@ ") {
			return nil, false, fmt.Errorf("store %q: PD endpoint %q is not HOST:PORT", s, a)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return nil, false, fmt.Errorf("store %q: PD endpoint %q: port %q is not a number from 1 to 65535", s, a, port)
		}
		pd = append(pd, a)
	}
	return pd, true, nil
}

// validateTiKV checks the settings of a deployment on a TiKV store.
func (d *Deployment) validateTiKV() error {
	if _, _, err := ParseStoreURL(d.Store); err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	switch {
	case d.Mode == ModeOwner:
		return errors.New("runner: mode owner does not apply to a TiKV store: no process owns it (use auto or client)")
	case d.StoreID != "":
		return fmt.Errorf("runner: a store id (%s) applies to a store served over NATS; a TiKV store is named by its PD endpoints and the namespace", d.StoreID)
	case d.NATSURL == "":
		return fmt.Errorf("%w: give its URL (-nats, TRICKLE_NATS_URL) to every process of the deployment", ErrNATSRequired)
	}
	if n := btoi(d.TiKV.CAPath != "") + btoi(d.TiKV.CertPath != "") + btoi(d.TiKV.KeyPath != ""); n != 0 && n != 3 {
		return fmt.Errorf("runner: TiKV TLS needs a CA, a certificate and a key, or none (got CA %q, certificate %q, key %q)", d.TiKV.CAPath, d.TiKV.CertPath, d.TiKV.KeyPath)
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// onTiKV reports whether the deployment's store is a TiKV cluster.
func (d *Deployment) onTiKV() bool { return d.Store != "" }

// tikvSetup is a process of a deployment on a TiKV cluster: it opened the
// store itself, with PD as the oracle, as every process of the deployment
// does. No process owns anything: there is no data directory lock, no
// embedded server and no takeover, and the runner that holds the GC lease
// collects (see Runner.collectLeased).
type tikvSetup struct {
	st *tikv.Store
	or framework.Oracle // PD
	id string           // the PD endpoints and the namespace
}

// openTiKV opens the deployment's TiKV store, with PD as the oracle, and
// connects to its NATS server.
func (n *Node) openTiKV(ctx context.Context) (setup, error) {
	pd, _, err := ParseStoreURL(n.cfg.Store)
	if err != nil {
		return nil, err
	}
	opts := &tikv.Options{
		Namespace: n.cfg.Namespace, Groups: protocol.Groups(), SafePoint: &protocol.SafePoint, Logger: n.log,
		ConnectTimeout: n.cfg.ConnectTimeout,
		CAPath:         n.cfg.TiKV.CAPath, CertPath: n.cfg.TiKV.CertPath, KeyPath: n.cfg.TiKV.KeyPath,
		Metrics: n.cfg.TiKV.Metrics,
	}
	var st *tikv.Store
	if c := n.cfg.TiKV.Client; c != nil {
		if m := n.cfg.TiKV.Metrics; m != nil {
			if err := tikv.RegisterMetrics(m); err != nil {
				return nil, err
			}
		}
		tikv.RouteClientLogs(n.log.Handler())
		st, err = tikv.New(ctx, c, opts)
	} else {
		st, err = tikv.Open(ctx, pd, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("runner: opening the TiKV store (PD %s): %w; check -store (TRICKLE_STORE), that PD answers there and, for TLS, the -tikv-ca, -tikv-cert and -tikv-key files", strings.Join(pd, ","), err)
	}
	t := &tikvSetup{st: st, or: st.Oracle(), id: TiKVScheme + strings.Join(pd, ",") + " namespace " + n.cfg.Namespace}
	cctx, cancel := context.WithTimeout(ctx, n.cfg.ConnectTimeout)
	defer cancel()
	if err := n.connect(cctx, n.cfg.NATSURL); err != nil {
		st.Close()
		return nil, fmt.Errorf("%w (tried for %v): every process of a deployment on TiKV needs the NATS server for liveness, row locks and wake-ups; check -nats (TRICKLE_NATS_URL) and its credentials", err, n.cfg.ConnectTimeout)
	}
	n.log.Info("opened the TiKV store", "pd", strings.Join(pd, ","), "namespace", n.cfg.Namespace, "nats", n.url)
	return t, nil
}

func (t *tikvSetup) store() store.Store       { return t.st }
func (t *tikvSetup) oracle() framework.Oracle { return t.or }
func (t *tikvSetup) storeID() string          { return t.id }
func (t *tikvSetup) owned() *ownerSetup       { return nil }

// oracleStats reports a fresh timestamp: PD serves every process and
// counts for none of them, so the latest timestamp is all there is.
func (t *tikvSetup) oracleStats(ctx context.Context) (issued, current uint64, err error) {
	now, err := t.or.Timestamp(ctx)
	return 0, now, err
}

func (t *tikvSetup) stop() error  { return nil }
func (t *tikvSetup) close() error { return t.st.Close() }

// TiKV returns the node's TiKV store, nil for a deployment on pebble:
// runners collect on it under a lease and advance TiKV's own safe point.
func (n *Node) TiKV() *tikv.Store {
	if t, ok := n.setup.(*tikvSetup); ok {
		return t.st
	}
	return nil
}

// withClientMetrics serves the metrics of h (the runner's, in the
// Prometheus text format) followed by those gathered by g (the TiKV
// client's), so that one scrape of /metrics gets both. h is asked for the
// text format whatever the scraper accepts, since the two are concatenated.
func withClientMetrics(h http.Handler, g prometheus.Gatherer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		inner := req.Clone(req.Context())
		inner.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
		buf := &bufferedResponse{header: http.Header{}, code: http.StatusOK}
		h.ServeHTTP(buf, inner)
		if buf.code != http.StatusOK {
			http.Error(w, buf.body.String(), buf.code)
			return
		}
		families, err := g.Gather()
		if err != nil {
			http.Error(w, "gathering the TiKV client's metrics: "+err.Error(), http.StatusInternalServerError)
			return
		}
		format := expfmt.NewFormat(expfmt.TypeTextPlain)
		w.Header().Set("Content-Type", string(format))
		w.Write(buf.body.Bytes())
		enc := expfmt.NewEncoder(w, format)
		for _, f := range families {
			if err := enc.Encode(f); err != nil {
				return
			}
		}
	})
}

// bufferedResponse is an http.ResponseWriter that keeps the response.
type bufferedResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header         { return b.header }
func (b *bufferedResponse) Write(p []byte) (int, error) { return b.body.Write(p) }
func (b *bufferedResponse) WriteHeader(code int)        { b.code = code }
