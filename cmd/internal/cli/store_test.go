package cli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/runner"
)

// writeCert writes a self-signed certificate and its key as PEM files.
func writeCert(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func parseStore(t *testing.T, env map[string]string, args ...string) (runner.Deployment, error) {
	t.Helper()
	var s Store
	f := New("test")
	f.StoreVars(&s)
	f.SetLookup(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	var d runner.Deployment
	if err := f.Parse(args); err != nil {
		return d, err
	}
	return d, s.Apply(&d)
}

func TestStoreFlags(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeCert(t, dir)
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")

	d, err := parseStore(t, nil)
	if err != nil || d.Store != "" {
		t.Fatalf("no flags: %+v, %v; want the embedded store", d.Store, err)
	}
	d, err = parseStore(t, map[string]string{"TRICKLE_STORE": "tikv://pd1:2379,pd2:2379"})
	if err != nil || d.Store != "tikv://pd1:2379,pd2:2379" {
		t.Fatalf("TRICKLE_STORE: %q, %v", d.Store, err)
	}
	d, err = parseStore(t, nil, "-store", "tikv://pd1:2379", "-tikv-ca", cert, "-tikv-cert", cert, "-tikv-key", key)
	if err != nil || d.TiKV.CAPath != cert || d.TiKV.CertPath != cert || d.TiKV.KeyPath != key {
		t.Fatalf("TLS flags: %+v, %v", d.TiKV, err)
	}
	d, err = parseStore(t, map[string]string{"TRICKLE_STORE": "tikv://pd1:2379", "TRICKLE_TIKV_CA": cert, "TRICKLE_TIKV_CERT": cert, "TRICKLE_TIKV_KEY": key})
	if err != nil || d.TiKV.KeyPath != key {
		t.Fatalf("TLS variables: %+v, %v", d.TiKV, err)
	}

	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{"bad URL", nil, []string{"-store", "pd1:2379"}, []string{"-store (TRICKLE_STORE)", "want tikv://"}},
		{"bad URL in env", map[string]string{"TRICKLE_STORE": "tikv://pd1"}, nil, []string{"TRICKLE_STORE", "not HOST:PORT"}},
		{"TLS without TiKV", nil, []string{"-tikv-ca", cert, "-tikv-cert", cert, "-tikv-key", key}, []string{"-tikv-ca", "only to a TiKV store"}},
		{"half TLS", nil, []string{"-store", "tikv://pd1:2379", "-tikv-ca", cert}, []string{"all of -tikv-ca, -tikv-cert and -tikv-key"}},
		{"missing CA", nil, []string{"-store", "tikv://pd1:2379", "-tikv-ca", missing, "-tikv-cert", cert, "-tikv-key", key}, []string{"-tikv-ca (TRICKLE_TIKV_CA)", "missing.pem"}},
		{"CA not PEM", nil, []string{"-store", "tikv://pd1:2379", "-tikv-ca", notPEM, "-tikv-cert", cert, "-tikv-key", key}, []string{"-tikv-ca", "no PEM certificate"}},
		{"key not PEM", nil, []string{"-store", "tikv://pd1:2379", "-tikv-ca", cert, "-tikv-cert", cert, "-tikv-key", notPEM}, []string{"-tikv-key", "not.pem"}},
		{"missing key", nil, []string{"-store", "tikv://pd1:2379", "-tikv-ca", cert, "-tikv-cert", cert, "-tikv-key", missing}, []string{"-tikv-key", "missing.pem"}},
	} {
		_, err := parseStore(t, c.env, c.args...)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not name %q", c.name, err, w)
			}
		}
	}
}
