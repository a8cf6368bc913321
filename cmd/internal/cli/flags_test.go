package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/runner"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"100": 100, "4k": 4096, "10MiB": 10 << 20, "1g": 1 << 30, "2KB": 2048} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1", "k", "1x", "99999999999g"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) accepted", in)
		}
	}
}

// The request flags and their variables reach the deployment; a bad value
// is an error naming the flag or the variable, and an out-of-range one is
// refused by the deployment's Validate, naming what was wrong.
func TestRequestFlags(t *testing.T) {
	parse := func(env map[string]string, args ...string) (runner.Deployment, error) {
		var d runner.Deployment
		f := New("test")
		f.RequestVars(&d)
		f.SetLookup(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		return d, f.Parse(args)
	}
	d, err := parse(nil)
	if err != nil || d.RequestTimeout != 10*time.Second || d.MinTransferRate != 1<<20 {
		t.Fatalf("defaults: %v, %v, %v", d.RequestTimeout, d.MinTransferRate, err)
	}
	d, err = parse(map[string]string{"TRICKLE_MIN_TRANSFER_RATE": "64k"}, "-request-timeout", "30s")
	if err != nil || d.RequestTimeout != 30*time.Second || d.MinTransferRate != 64<<10 {
		t.Fatalf("set: %v, %v, %v", d.RequestTimeout, d.MinTransferRate, err)
	}
	if err := d.EnsureDefaults().Validate(); err != nil {
		t.Fatalf("valid settings refused: %v", err)
	}
	if _, err := parse(map[string]string{"TRICKLE_MIN_TRANSFER_RATE": "fast"}); err == nil || !strings.Contains(err.Error(), "TRICKLE_MIN_TRANSFER_RATE") {
		t.Errorf("bad variable: %v, want an error naming TRICKLE_MIN_TRANSFER_RATE", err)
	}
	if _, err := parse(nil, "-request-timeout", "soon"); err == nil || !strings.Contains(err.Error(), "request-timeout") {
		t.Errorf("bad flag: %v, want an error naming -request-timeout", err)
	}
	for args, want := range map[[2]string]string{
		{"-min-transfer-rate", "100"}: "min transfer rate",
		{"-request-timeout", "2h"}:    "request timeout",
	} {
		d, err := parse(nil, args[0], args[1])
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if err := d.EnsureDefaults().Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: Validate: %v, want an error about the %s", args, err, want)
		}
	}
}
