package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"

	"github.com/trickle-dev/trickle/remote"
)

// storeIDFile holds the id of the store in a data directory, made when the
// store is first opened. Clients compare it with what the process they
// reach serves, so that a mistyped port or URL cannot make them write into
// another deployment's store.
const storeIDFile = "STORE-ID"

// ErrWrongStore means a client reached a store other than the one it
// expects: the store in its data directory, or the one Config.StoreID
// names, or after a reconnect another one than it was using (the service
// then refuses its requests: remote.ErrWrongStore, the same error).
var ErrWrongStore = remote.ErrWrongStore

// ReadStoreID returns the id of the store in the data directory dir, as its
// owner recorded it.
func ReadStoreID(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, storeIDFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("runner: %s holds no store id (%s): no runner has opened a store there; start one, or check -data: %w", dir, storeIDFile, err)
	}
	if err != nil {
		return "", fmt.Errorf("runner: reading the store id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", fmt.Errorf("runner: %s is empty", filepath.Join(dir, storeIDFile))
	}
	return id, nil
}

// loadOrCreateStoreID returns the id of the store in dir, making one if
// the directory has none yet (a new store, or one made before ids).
func loadOrCreateStoreID(dir string) (string, error) {
	path := filepath.Join(dir, storeIDFile)
	if _, err := os.Stat(path); err == nil {
		return ReadStoreID(dir)
	}
	id := uuid.NewString()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("runner: writing the store id: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("runner: writing the store id: %w", err)
	}
	return id, nil
}
