package cluster

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/nats-io/nkeys"
)

// LocalCredentialsFile is the name of the file, in the directory given to
// LocalCredentials, holding the seed of the embedded server's client NKey.
const LocalCredentialsFile = "nats-client.nk"

// ErrUnsafeCredentials is wrapped by LocalCredentials' error when the
// credentials file exists but other users may have read or replaced it.
var ErrUnsafeCredentials = errors.New("cluster: credentials file is not private")

// Credentials are what an embedded server and its clients share: a user
// NKey. The server knows only the public key; a client proves it holds the
// seed by signing a random nonce the server sends, so the secret never
// crosses the connection and the server never stores it. This is the
// embedded server's only way of authenticating: it needs nothing beyond the
// NKey support nats-server and nats.go already have, and, unlike a password
// or token, it leaves nothing to replay for whoever can watch the loopback
// interface or the server's own traces.
type Credentials struct {
	// PublicKey is the user NKey ("U...") the server accepts: give it to
	// StartEmbedded as EmbeddedOptions.ClientNKey.
	PublicKey string
	// SeedFile is the file holding the seed, readable only by its owner:
	// give it to clients as ConnectOptions.NKeySeedFile.
	SeedFile string
}

// LocalCredentials returns the credentials kept in dir (in the file
// LocalCredentialsFile), creating them on first use: a new user NKey from
// crypto/rand, written atomically with mode 0600, so that the process
// starting an embedded server and every client on the machine running as the
// same user find the same key in the data directory they share. Concurrent
// first calls agree on one key.
//
// An existing file is used only if it is a regular file owned by the
// current user and not accessible to group or others; otherwise the error
// wraps ErrUnsafeCredentials and says what to do. dir is created (mode 0700)
// if missing.
func LocalCredentials(dir string) (Credentials, error) {
	if dir == "" {
		return Credentials{}, fmt.Errorf("%w: LocalCredentials needs a directory", ErrInvalidOptions)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Credentials{}, fmt.Errorf("cluster: credentials directory: %w", err)
	}
	path := filepath.Join(dir, LocalCredentialsFile)
	c, err := loadLocalCredentials(path, os.Getuid())
	if !errors.Is(err, fs.ErrNotExist) {
		return c, err
	}
	c, err = createLocalCredentials(dir, path)
	if errors.Is(err, fs.ErrExist) {
		// Another process created it first: use its key.
		return loadLocalCredentials(path, os.Getuid())
	}
	return c, err
}

// ReadLocalCredentials returns the credentials kept in dir without creating
// any: for clients, which must not invent a key the server does not know.
// A missing file is an error wrapping fs.ErrNotExist; an unsafe one wraps
// ErrUnsafeCredentials.
func ReadLocalCredentials(dir string) (Credentials, error) {
	return loadLocalCredentials(filepath.Join(dir, LocalCredentialsFile), os.Getuid())
}

// loadLocalCredentials reads the seed file at path, which must be private to
// the user uid. It checks the open file, not the path, so that the file
// checked is the file read.
func loadLocalCredentials(path string, uid int) (Credentials, error) {
	f, err := os.Open(path)
	if err != nil {
		return Credentials{}, fmt.Errorf("cluster: credentials: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Credentials{}, fmt.Errorf("cluster: credentials: %w", err)
	}
	if !st.Mode().IsRegular() {
		return Credentials{}, fmt.Errorf("%w: %s is not a regular file (%s)", ErrUnsafeCredentials, path, st.Mode().Type())
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != uid {
		return Credentials{}, fmt.Errorf("%w: %s is owned by uid %d, not by this process's user (uid %d): run as the user owning the data directory, or remove the file to have a new key made",
			ErrUnsafeCredentials, path, sys.Uid, uid)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return Credentials{}, fmt.Errorf("%w: %s has mode %#o, open to group or others, so its key may have been read: remove it to have a new key made (clients pick it up from the same file), or chmod 600 it if it cannot have been",
			ErrUnsafeCredentials, path, perm)
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return Credentials{}, fmt.Errorf("cluster: credentials %s: %w", path, err)
	}
	defer wipe(b)
	kp, err := nkeys.ParseDecoratedUserNKey(b)
	if err != nil {
		return Credentials{}, fmt.Errorf("cluster: credentials %s: not a user NKey seed file (%w): remove it to have a new key made", path, err)
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err != nil {
		return Credentials{}, fmt.Errorf("cluster: credentials %s: %w", path, err)
	}
	return Credentials{PublicKey: pub, SeedFile: path}, nil
}

// createLocalCredentials writes a new seed to path unless a file is already
// there, in which case the error wraps fs.ErrExist. The seed goes to a
// private temporary file first and is then hard-linked into place, which
// (unlike a rename) fails rather than replacing a file created meanwhile;
// readers never see a partial file.
func createLocalCredentials(dir, path string) (Credentials, error) {
	kp, err := nkeys.CreatePairWithRand(nkeys.PrefixByteUser, rand.Reader)
	if err != nil {
		return Credentials{}, fmt.Errorf("cluster: generating credentials: %w", err)
	}
	defer kp.Wipe()
	seed, err := kp.Seed()
	if err != nil {
		return Credentials{}, fmt.Errorf("cluster: generating credentials: %w", err)
	}
	defer wipe(seed)
	pub, err := kp.PublicKey()
	if err != nil {
		return Credentials{}, fmt.Errorf("cluster: generating credentials: %w", err)
	}

	tmp, err := os.CreateTemp(dir, "."+LocalCredentialsFile+".*")
	if err != nil {
		return Credentials{}, fmt.Errorf("cluster: writing credentials: %w", err)
	}
	defer os.Remove(tmp.Name())
	content := append([]byte("# NKey seed of the trickle embedded NATS server's client user. Keep private (mode 0600).\n"), seed...)
	content = append(content, '\n')
	defer wipe(content)
	err = tmp.Chmod(0o600)
	if err == nil {
		_, err = tmp.Write(content)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Credentials{}, fmt.Errorf("cluster: writing credentials %s: %w", tmp.Name(), err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		return Credentials{}, fmt.Errorf("cluster: writing credentials: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return Credentials{}, fmt.Errorf("cluster: writing credentials: syncing %s: %w", dir, err)
		}
	}
	return Credentials{PublicKey: pub, SeedFile: path}, nil
}
