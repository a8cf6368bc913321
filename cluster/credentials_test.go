package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

func TestLocalCredentialsCreateThenLoad(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data", "nats")
	c, err := LocalCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.SeedFile != filepath.Join(dir, LocalCredentialsFile) || !nkeys.IsValidPublicUserKey(c.PublicKey) {
		t.Fatalf("credentials %+v", c)
	}
	st, err := os.Stat(c.SeedFile)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("seed file mode %#o, want 0600", st.Mode().Perm())
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("created directory: %v, %v", st.Mode(), err)
	}
	// The file holds the seed of the public key returned.
	b, err := os.ReadFile(c.SeedFile)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := nkeys.ParseDecoratedUserNKey(b)
	if err != nil {
		t.Fatal(err)
	}
	if pub, _ := kp.PublicKey(); pub != c.PublicKey {
		t.Fatalf("file holds the seed of %s, returned %s", pub, c.PublicKey)
	}
	// Other NATS tools read it as a seed file too.
	if _, err := nats.NkeyOptionFromSeed(c.SeedFile); err != nil {
		t.Fatal(err)
	}

	again, err := LocalCredentials(dir)
	if err != nil || again != c {
		t.Fatalf("second call: %+v, %v; want %+v", again, err, c)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("directory holds %v (%v); want only %s", entries, err, LocalCredentialsFile)
	}

	other, err := LocalCredentials(t.TempDir())
	if err != nil || other.PublicKey == c.PublicKey {
		t.Fatalf("another directory: %+v, %v", other, err)
	}
}

func TestLocalCredentialsConcurrentFirstUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const n = 8
	got := make([]Credentials, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { got[i], errs[i] = LocalCredentials(dir) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if got[i] != got[0] {
			t.Fatalf("callers disagree: %+v and %+v", got[0], got[i])
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("directory holds %v (%v); want only %s", entries, err, LocalCredentialsFile)
	}
}

func TestLocalCredentialsRefusesUnsafeFile(t *testing.T) {
	t.Parallel()
	for _, mode := range []os.FileMode{0o640, 0o604, 0o620, 0o602, 0o644, 0o666} {
		dir := t.TempDir()
		c, err := LocalCredentials(dir)
		if err != nil {
			t.Fatal(err)
		}
		before, err := os.ReadFile(c.SeedFile)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(c.SeedFile, mode); err != nil {
			t.Fatal(err)
		}
		_, err = LocalCredentials(dir)
		if !errors.Is(err, ErrUnsafeCredentials) || !strings.Contains(err.Error(), c.SeedFile) || !strings.Contains(err.Error(), fmt.Sprintf("mode %#o", mode)) {
			t.Errorf("mode %#o: err = %v", mode, err)
		}
		// The file is left alone for its owner to inspect.
		after, err := os.ReadFile(c.SeedFile)
		if err != nil || string(after) != string(before) {
			t.Errorf("mode %#o: file changed (%v)", mode, err)
		}
	}
}

func TestLocalCredentialsRefusesOtherOwner(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, err := LocalCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	// As a user the file does not belong to.
	_, err = loadLocalCredentials(c.SeedFile, os.Getuid()+1)
	if !errors.Is(err, ErrUnsafeCredentials) || !strings.Contains(err.Error(), "owned by uid") || !strings.Contains(err.Error(), c.SeedFile) {
		t.Fatalf("err = %v", err)
	}
	if os.Geteuid() != 0 {
		return
	}
	// As root, the real thing: a file someone else owns.
	if err := os.Chown(c.SeedFile, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := LocalCredentials(dir); !errors.Is(err, ErrUnsafeCredentials) || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Fatalf("err = %v", err)
	}
}

func TestLocalCredentialsBadFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := writeFile(t, dir, LocalCredentialsFile, []byte("not a seed\n"))
	_, err := LocalCredentials(dir)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "not a user NKey seed") {
		t.Fatalf("garbage: err = %v", err)
	}

	// An account seed is a seed, but not a user's.
	acc, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := acc.Seed()
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, LocalCredentialsFile, seed)
	if _, err := LocalCredentials(dir); err == nil || !strings.Contains(err.Error(), "not a user NKey seed") {
		t.Fatalf("account seed: err = %v", err)
	}

	dir = t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, LocalCredentialsFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := LocalCredentials(dir); !errors.Is(err, ErrUnsafeCredentials) || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("directory: err = %v", err)
	}

	if _, err := LocalCredentials(""); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("no directory: err = %v", err)
	}
	notDir := writeFile(t, t.TempDir(), "file", []byte("x"))
	if _, err := LocalCredentials(notDir); err == nil || !strings.Contains(err.Error(), notDir) {
		t.Fatalf("file as directory: err = %v", err)
	}
}
