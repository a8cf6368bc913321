package main

import (
	"strings"
	"testing"
)

// Every command takes the store flags, and a TiKV store without what it
// needs is an error naming the flag, before anything connects.
func TestStoreFlagErrors(t *testing.T) {
	t.Setenv("TRICKLE_NATS_URL", "")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"status", "-store", "pd1:2379"}, []string{"-store (TRICKLE_STORE)", "tikv://"}},
		{[]string{"-store", "tikv://127.0.0.1:1", "wait"}, []string{"external NATS", "-nats"}},
		{[]string{"-store", "tikv://127.0.0.1:1", "-mode", "owner", "-nats", "nats://127.0.0.1:1", "-http", "off"}, []string{"no process owns it"}},
		{[]string{"status", "-store", "tikv://127.0.0.1:1", "-tikv-ca", "/nonexistent/ca.pem", "-tikv-cert", "c", "-tikv-key", "k"}, []string{"-tikv-ca (TRICKLE_TIKV_CA)", "/nonexistent/ca.pem"}},
	} {
		code, _, errOut := runCmd(t, tc.args...)
		for _, w := range tc.want {
			if code != 1 || !strings.Contains(errOut, w) {
				t.Errorf("%v: exit %d, stderr %q; want 1 and %q", tc.args, code, errOut, w)
			}
		}
	}
	t.Setenv("TRICKLE_STORE", "tikv://pd1")
	if code, _, errOut := runCmd(t, "status"); code != 1 || !strings.Contains(errOut, "TRICKLE_STORE") {
		t.Errorf("bad TRICKLE_STORE: exit %d, stderr %q", code, errOut)
	}
}
