package cli

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/trickle-dev/trickle/runner"
)

// Store is what the store flags set: where a deployment's store is, and
// TLS for a TiKV cluster.
type Store struct {
	URL           string
	CA, Cert, Key string
	defined       bool
}

// StoreVars defines the store flags on f, with their variables: -store
// (TRICKLE_STORE), -tikv-ca (TRICKLE_TIKV_CA), -tikv-cert
// (TRICKLE_TIKV_CERT) and -tikv-key (TRICKLE_TIKV_KEY).
func (f *Flags) StoreVars(s *Store) {
	f.StringVar(&s.URL, "store", "", "the deployment's store: tikv://PD-HOST:PORT[,PD-HOST:PORT...] for a TiKV cluster (needs -nats); empty: the embedded store in the data directory")
	f.Env("store", "TRICKLE_STORE")
	f.StringVar(&s.CA, "tikv-ca", "", "PEM file of the CA of the TiKV cluster, for TLS to PD and TiKV (with -tikv-cert and -tikv-key)")
	f.Env("tikv-ca", "TRICKLE_TIKV_CA")
	f.StringVar(&s.Cert, "tikv-cert", "", "PEM file of this process's certificate for TLS to PD and TiKV")
	f.Env("tikv-cert", "TRICKLE_TIKV_CERT")
	f.StringVar(&s.Key, "tikv-key", "", "PEM file of the key of -tikv-cert")
	f.Env("tikv-key", "TRICKLE_TIKV_KEY")
	s.defined = true
}

// Apply checks the store flags f parsed and sets them in d. Every problem
// is an error naming the flag and its variable: a store URL that is not
// tikv://HOST:PORT[,...], TLS files without a TiKV store or not all three,
// and files that cannot be read or hold no usable PEM certificate or key.
// Files are checked here, before anything connects.
func (s *Store) Apply(d *runner.Deployment) error {
	if !s.defined {
		panic("cli: Store.Apply before StoreVars")
	}
	_, onTiKV, err := runner.ParseStoreURL(s.URL)
	if err != nil {
		return fmt.Errorf("-store (TRICKLE_STORE): %w", err)
	}
	withTLS := s.CA != "" || s.Cert != "" || s.Key != ""
	switch {
	case withTLS && !onTiKV:
		return fmt.Errorf("-tikv-ca, -tikv-cert and -tikv-key (TRICKLE_TIKV_CA, _CERT, _KEY) apply only to a TiKV store (-store tikv://...)")
	case withTLS && (s.CA == "" || s.Cert == "" || s.Key == ""):
		return fmt.Errorf("TLS to TiKV needs all of -tikv-ca, -tikv-cert and -tikv-key (TRICKLE_TIKV_CA, _CERT, _KEY); got CA %q, certificate %q, key %q", s.CA, s.Cert, s.Key)
	case withTLS:
		if err := checkCA(s.CA); err != nil {
			return fmt.Errorf("-tikv-ca (TRICKLE_TIKV_CA) %s: %w", s.CA, err)
		}
		if err := checkKeyPair(s.Cert, s.Key); err != nil {
			return fmt.Errorf("-tikv-cert and -tikv-key (TRICKLE_TIKV_CERT, TRICKLE_TIKV_KEY) %s, %s: %w", s.Cert, s.Key, err)
		}
	}
	d.Store = s.URL
	d.TiKV.CAPath, d.TiKV.CertPath, d.TiKV.KeyPath = s.CA, s.Cert, s.Key
	return nil
}

// checkCA checks that path holds at least one PEM certificate.
func checkCA(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		return fmt.Errorf("no PEM certificate in it")
	}
	return nil
}

// checkKeyPair checks that the two files hold a certificate and its key.
func checkKeyPair(cert, key string) error {
	for _, p := range []string{cert, key} {
		if _, err := os.Stat(p); err != nil {
			return err
		}
	}
	if _, err := tls.LoadX509KeyPair(cert, key); err != nil {
		return err
	}
	return nil
}
