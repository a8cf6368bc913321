package remote

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestOptionsInvalid: every unusable field fails the constructor with an
// *OptionError naming it, before anything is subscribed or sent.
func TestOptionsInvalid(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	db := openMem(t)
	b := newCountingOracle(t)
	for _, tc := range []struct {
		field string
		opts  ServiceOptions
	}{
		{"SubjectPrefix", ServiceOptions{SubjectPrefix: "a..b"}},
		{"SubjectPrefix", ServiceOptions{SubjectPrefix: "a.*"}},
		{"SubjectPrefix", ServiceOptions{SubjectPrefix: "a b"}},
		{"SubjectPrefix", ServiceOptions{SubjectPrefix: "a."}},
		{"QueueGroup", ServiceOptions{QueueGroup: "q>"}},
		{"QueueGroup", ServiceOptions{QueueGroup: "q.r"}},
		{"HandlerTimeout", ServiceOptions{HandlerTimeout: -time.Second}},
		{"HandlerTimeout", ServiceOptions{HandlerTimeout: 2 * time.Hour}},
		{"StoreConcurrency", ServiceOptions{StoreConcurrency: -1}},
		{"StoreConcurrency", ServiceOptions{StoreConcurrency: MaxConcurrency + 1}},
		{"OracleConcurrency", ServiceOptions{OracleConcurrency: -1}},
		{"MaxBufferedBytes", ServiceOptions{MaxBufferedBytes: 1 << 10}},
		{"MaxBufferedBytes", ServiceOptions{MaxBufferedBytes: 1<<40 + 1}},
		{"StoreWhere", ServiceOptions{StoreWhere: "host:/data"}},
	} {
		want := "ServiceOptions." + tc.field
		for name, serve := range map[string]func(*ServiceOptions) error{
			"ServeStore":  func(o *ServiceOptions) error { _, err := ServeStore(nc, db, o); return err },
			"ServeOracle": func(o *ServiceOptions) error { _, err := ServeOracle(nc, b, o); return err },
		} {
			o := tc.opts
			o.Logger = quiet
			err := serve(&o)
			var oe *OptionError
			if !errors.As(err, &oe) || oe.Field != want || !strings.Contains(err.Error(), want) {
				t.Errorf("%s(%+v): %v, want an *OptionError for %s", name, tc.opts, err, want)
			}
		}
	}
	for _, tc := range []struct {
		field string
		opts  ClientOptions
	}{
		{"SubjectPrefix", ClientOptions{SubjectPrefix: ".a"}},
		{"RequestTimeout", ClientOptions{RequestTimeout: time.Microsecond}},
		{"RequestTimeout", ClientOptions{RequestTimeout: 2 * time.Hour}},
		{"ScanPageCells", ClientOptions{ScanPageCells: MaxScanPageCells + 1}},
		{"ScanPageCells", ClientOptions{ScanPageCells: -5}},
		{"MaxBufferedBytes", ClientOptions{MaxBufferedBytes: -1}},
		{"MinTransferRate", ClientOptions{MinTransferRate: 100}},
		{"MinTransferRate", ClientOptions{MinTransferRate: -1}},
	} {
		want := "ClientOptions." + tc.field
		for name, dial := range map[string]func(*ClientOptions) error{
			"NewStore":  func(o *ClientOptions) error { _, err := NewStore(nc, o); return err },
			"NewOracle": func(o *ClientOptions) error { _, err := NewOracle(nc, o); return err },
		} {
			var oe *OptionError
			if err := dial(&tc.opts); !errors.As(err, &oe) || oe.Field != want || !strings.Contains(err.Error(), want) {
				t.Errorf("%s(%+v): %v, want an *OptionError for %s", name, tc.opts, err, want)
			}
		}
	}
	// Validate without EnsureDefaults reports what has no default yet.
	var oe *OptionError
	if err := (&ServiceOptions{SubjectPrefix: "p", QueueGroup: "q"}).Validate(); !errors.As(err, &oe) || oe.Field != "ServiceOptions.Logger" {
		t.Errorf("Validate without a logger: %v", err)
	}
	if err := (&ClientOptions{}).Validate(); !errors.As(err, &oe) || oe.Field != "ClientOptions.SubjectPrefix" {
		t.Errorf("Validate of the zero ClientOptions: %v", err)
	}

	if _, err := NewStore(nil, nil); err == nil {
		t.Error("NewStore(nil) succeeded")
	}
	if _, err := NewOracle(nil, nil); err == nil {
		t.Error("NewOracle(nil) succeeded")
	}
	if _, err := ServeStore(nc, nil, nil); err == nil {
		t.Error("ServeStore(nil store) succeeded")
	}
	if _, err := ServeOracle(nc, nil, nil); err == nil {
		t.Error("ServeOracle(nil backend) succeeded")
	}
}

// TestOptionsDefaults: EnsureDefaults fills every field with its
// documented default, the result validates, and each service takes its
// own concurrency from one shared ServiceOptions.
func TestOptionsDefaults(t *testing.T) {
	s := new(ServiceOptions).EnsureDefaults()
	if s.SubjectPrefix != DefaultPrefix || s.QueueGroup != DefaultQueueGroup || s.Logger == nil ||
		s.HandlerTimeout != DefaultHandlerTimeout || s.StoreConcurrency != DefaultStoreConcurrency ||
		s.OracleConcurrency != DefaultOracleConcurrency || s.MaxBufferedBytes != DefaultMaxBufferedBytes ||
		s.StoreID != "" || s.StoreWhere != "" || s.now == nil {
		t.Errorf("ServiceOptions defaults: %+v", s)
	}
	if err := s.Validate(); err != nil {
		t.Errorf("default ServiceOptions: %v", err)
	}
	c := new(ClientOptions).EnsureDefaults()
	if *c != (ClientOptions{SubjectPrefix: DefaultPrefix, RequestTimeout: DefaultRequestTimeout,
		ScanPageCells: DefaultScanPageCells, MaxBufferedBytes: DefaultMaxBufferedBytes, MinTransferRate: DefaultMinTransferRate}) {
		t.Errorf("ClientOptions defaults: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("default ClientOptions: %v", err)
	}

	ns := startNATS(t)
	nc := connect(t, ns)
	shared := &ServiceOptions{Logger: quiet, OracleConcurrency: 3}
	st, err := ServeStore(nc, openMem(t), shared)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Stop()
	or, err := ServeOracle(nc, newCountingOracle(t), shared)
	if err != nil {
		t.Fatal(err)
	}
	defer or.Stop()
	if st.srv.maxWorkers != DefaultStoreConcurrency || or.srv.maxWorkers != 3 {
		t.Errorf("workers: store %d, oracle %d; want %d and 3", st.srv.maxWorkers, or.srv.maxWorkers, DefaultStoreConcurrency)
	}
	if shared.StoreConcurrency != 0 || shared.SubjectPrefix != "" {
		t.Errorf("the caller's options were changed: %+v", shared)
	}
	plain, err := ServeOracle(connect(t, ns), newCountingOracle(t), &ServiceOptions{Logger: quiet, SubjectPrefix: "other"})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Stop()
	if plain.srv.maxWorkers != DefaultOracleConcurrency {
		t.Errorf("oracle workers by default: %d, want %d", plain.srv.maxWorkers, DefaultOracleConcurrency)
	}
}

// TestOptionsPrefix: two deployments share one NATS system, apart by
// subject prefix.
func TestOptionsPrefix(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	svc, err := ServeOracle(nc, newCountingOracle(t), &ServiceOptions{SubjectPrefix: "dep.one", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	one, err := NewOracle(nc, &ClientOptions{SubjectPrefix: "dep.one"})
	if err != nil {
		t.Fatal(err)
	}
	two, err := NewOracle(nc, &ClientOptions{SubjectPrefix: "dep.two"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := one.Reserve(bg, 1); err != nil {
		t.Error(err)
	}
	if _, err := two.Reserve(bg, 1); !errors.Is(err, ErrUnavailable) {
		t.Errorf("other prefix: %v, want ErrUnavailable", err)
	}
}
