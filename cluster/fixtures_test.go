package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// Fixtures for the authentication tests: certificates, NKeys, JWTs and
// nats-server instances configured to require them.

// writeFile writes b to name in dir with mode 0600 and returns its path.
func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// testCA is a certificate authority issuing certificates for tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // the CA certificate, PEM
}

func newSerial(t *testing.T) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func newTestCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          newSerial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, dir, name+".pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return &testCA{cert: cert, key: key, file: file}
}

// issue makes a certificate for 127.0.0.1 usable by a server and a client,
// returning its PEM certificate and key.
func (ca *testCA) issue(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: newSerial(t),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// issueFiles is issue writing the certificate and key to dir.
func (ca *testCA) issueFiles(t *testing.T, dir, cn string) (certFile, keyFile string) {
	t.Helper()
	c, k := ca.issue(t, cn)
	return writeFile(t, dir, cn+".pem", c), writeFile(t, dir, cn+"-key.pem", k)
}

// serverTLS is a server TLS configuration with a certificate from ca that,
// if clientCA is not nil, requires clients to present a certificate it
// issued.
func (ca *testCA) serverTLS(t *testing.T, clientCA *testCA) *tls.Config {
	t.Helper()
	c, k := ca.issue(t, "server")
	pair, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if clientCA != nil {
		pool := x509.NewCertPool()
		pool.AddCert(clientCA.cert)
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg
}

// newUserSeed makes a user NKey, returning its seed and public key.
func newUserSeed(t *testing.T) (seed []byte, pub string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, err = kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	pub, err = kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return seed, pub
}

// testOperator is a NATS operator with one account, for decentralized
// (JWT) authentication.
type testOperator struct {
	claims     *jwt.OperatorClaims
	accountPub string
	accountJWT string
	accountKP  nkeys.KeyPair
}

func newTestOperator(t *testing.T) *testOperator {
	t.Helper()
	okp, err := nkeys.CreateOperator()
	if err != nil {
		t.Fatal(err)
	}
	opub, err := okp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	oc := jwt.NewOperatorClaims(opub)
	oc.Name = "test-operator"
	ojwt, err := oc.Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	if oc, err = jwt.DecodeOperatorClaims(ojwt); err != nil {
		t.Fatal(err)
	}

	akp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	apub, err := akp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	ac := jwt.NewAccountClaims(apub)
	ac.Name = "test-account"
	ajwt, err := ac.Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	return &testOperator{claims: oc, accountPub: apub, accountJWT: ajwt, accountKP: akp}
}

// credsFile issues a user in op's account and writes its credentials file.
func (op *testOperator) credsFile(t *testing.T, dir, name string) string {
	t.Helper()
	seed, pub := newUserSeed(t)
	uc := jwt.NewUserClaims(pub)
	uc.Name = name
	ujwt, err := uc.Encode(op.accountKP)
	if err != nil {
		t.Fatal(err)
	}
	b, err := jwt.FormatUserConfig(ujwt, seed)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, name+".creds", b)
}

// serverOptions configure a server trusting op, with op's account known to
// its resolver.
func (op *testOperator) serverOptions(t *testing.T) *server.Options {
	t.Helper()
	res := &server.MemAccResolver{}
	if err := res.Store(op.accountPub, op.accountJWT); err != nil {
		t.Fatal(err)
	}
	return &server.Options{TrustedOperators: []*jwt.OperatorClaims{op.claims}, AccountResolver: res}
}

// runServer starts a plain nats-server (no JetStream) with o's
// authentication and TLS settings on a random loopback port, shut down when
// the test ends, and returns its client URL.
func runServer(t *testing.T, o *server.Options) string {
	t.Helper()
	o.Host, o.Port = "127.0.0.1", -1
	o.NoSigs, o.NoLog = true, true
	if o.TLSConfig != nil {
		o.TLS = true
		o.TLSVerify = o.TLSConfig.ClientAuth == tls.RequireAndVerifyClientCert
		o.TLSTimeout = 5
	}
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("test nats-server not ready")
	}
	return s.ClientURL()
}
