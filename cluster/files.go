package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// The credential and TLS files named in ConnectOptions are read and parsed
// here, both by Validate (so that a missing or malformed file is a
// configuration error before any connection attempt, rather than a TLS-less
// or anonymous connection, or an endless series of failed attempts) and by
// the connection itself, which re-reads them on every attempt so that
// rotated credentials are picked up on reconnect. Errors name the problem
// but not the file: callers add the option or variable name and the path.

// readOptionFile reads a whole file, reducing *fs.PathError to its cause
// (the caller names the path).
func readOptionFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("cannot read: %w", pe.Err)
		}
		return nil, fmt.Errorf("cannot read: %w", err)
	}
	return b, nil
}

// userCreds is what a NATS credentials file holds: a user JWT and the seed
// of the user NKey it was issued to.
type userCreds struct {
	jwt string
	kp  nkeys.KeyPair
}

// loadCredsFile reads and checks a credentials file: a decodable user JWT,
// a user seed, and the seed belonging to the user the JWT names. The caller
// must Wipe the returned key pair.
func loadCredsFile(path string) (userCreds, error) {
	b, err := readOptionFile(path)
	if err != nil {
		return userCreds{}, err
	}
	defer wipe(b)
	token, err := nkeys.ParseDecoratedJWT(b)
	if err != nil {
		return userCreds{}, fmt.Errorf("no user JWT: %w", err)
	}
	claims, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return userCreds{}, fmt.Errorf("not a NATS credentials file (no valid user JWT): %w", err)
	}
	kp, err := nkeys.ParseDecoratedUserNKey(b)
	if err != nil {
		return userCreds{}, fmt.Errorf("not a NATS credentials file (no user NKey seed): %w", err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		kp.Wipe()
		return userCreds{}, fmt.Errorf("user NKey seed: %w", err)
	}
	if pub != claims.Subject {
		kp.Wipe()
		return userCreds{}, fmt.Errorf("the seed is for user %s but the JWT was issued to %s", pub, claims.Subject)
	}
	return userCreds{jwt: token, kp: kp}, nil
}

// loadSeedFile reads a user NKey seed ("SU...", bare or decorated). The
// caller must Wipe the returned key pair.
func loadSeedFile(path string) (nkeys.KeyPair, error) {
	b, err := readOptionFile(path)
	if err != nil {
		return nil, err
	}
	defer wipe(b)
	kp, err := nkeys.ParseDecoratedUserNKey(b)
	if err != nil {
		return nil, fmt.Errorf("not a user NKey seed file: %w", err)
	}
	return kp, nil
}

// seedPublicKey returns the public user key of the seed in path.
func seedPublicKey(path string) (string, error) {
	kp, err := loadSeedFile(path)
	if err != nil {
		return "", err
	}
	defer kp.Wipe()
	return kp.PublicKey()
}

// checkCAFile checks that path holds at least one PEM certificate and that
// every certificate in it parses. (x509.CertPool.AppendCertsFromPEM skips
// broken ones silently, which would turn a damaged bundle into a confusing
// verification failure later.)
func checkCAFile(path string) error {
	b, err := readOptionFile(path)
	if err != nil {
		return err
	}
	return checkCertPEM(b)
}

func checkCertPEM(b []byte) error {
	n := 0
	for rest := b; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		n++
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("certificate %d: %w", n, err)
		}
	}
	if n == 0 {
		return errors.New("no PEM certificate found")
	}
	return nil
}

// checkKeyPair checks a client certificate and its key. It returns which of
// the two is at fault: certFault means the certificate file.
func checkKeyPair(certPath, keyPath string) (certFault bool, err error) {
	certPEM, err := readOptionFile(certPath)
	if err != nil {
		return true, err
	}
	if err := checkCertPEM(certPEM); err != nil {
		return true, err
	}
	keyPEM, err := readOptionFile(keyPath)
	if err != nil {
		return false, err
	}
	defer wipe(keyPEM)
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return false, fmt.Errorf("not a private key for the client certificate: %w", err)
	}
	return false, nil
}

// wipe overwrites secret material read from a file once it is parsed.
func wipe(b []byte) {
	for i := range b {
		b[i] = 'x'
	}
}
