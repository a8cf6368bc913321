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

// A size prints with the largest suffix that divides it, as the
// documentation writes defaults, and reads back as the same count.
func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{1 << 20: "1m", 10 << 20: "10m", 2 << 30: "2g", 64 << 10: "64k", 1536 << 10: "1536k", 1000: "1000", 0: "0"} {
		got := formatSize(n)
		if got != want {
			t.Errorf("formatSize(%d) = %q, want %q", n, got, want)
		}
		if n > 0 {
			if back, err := parseSize(got); err != nil || back != n {
				t.Errorf("parseSize(%q) = %d, %v; want %d", got, back, err, n)
			}
		}
	}
	var d runner.Deployment
	f := New("test")
	f.RequestVars(&d)
	var help strings.Builder
	f.PrintDefaults(&help)
	if !strings.Contains(help.String(), "(default 1m)") || strings.Contains(help.String(), "1048576") {
		t.Errorf("-help shows the -min-transfer-rate default other than as 1m:\n%s", help.String())
	}
}

// Unbound names the flags with neither a variable nor an exemption.
func TestUnbound(t *testing.T) {
	f := New("test")
	f.String("bound", "", "")
	f.Env("bound", "TEST_BOUND")
	f.String("exempt", "", "")
	f.NoEnv("exempt")
	f.String("loose", "", "")
	if got := f.Unbound(); len(got) != 1 || got[0] != "loose" {
		t.Errorf("Unbound() = %q, want [loose]", got)
	}
	if got := f.Exempt(); len(got) != 1 || got[0] != "exempt" {
		t.Errorf("Exempt() = %q, want [exempt]", got)
	}
}
