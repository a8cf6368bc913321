package runner

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/trickle-dev/trickle/cluster"
)

// embeddedCredentials makes the embedded server of the data directory dir
// require the client key kept there (created on first use), so that the
// server is closed to anyone who cannot read the data directory.
func embeddedCredentials(o *cluster.EmbeddedOptions, dir string) error {
	c, err := cluster.LocalCredentials(dir)
	if err != nil {
		return fmt.Errorf("runner: NATS credentials of the embedded server: %w", err)
	}
	o.ClientNKey = c.PublicKey
	return nil
}

// localCredentials sets o to authenticate to the embedded server of the
// data directory dir with the key kept there. Credentials and TLS settings
// from the environment are for an external NATS (-nats) and are dropped:
// the embedded server knows only its own key and speaks no TLS.
func localCredentials(o *cluster.ConnectOptions, dir string) error {
	c, err := cluster.ReadLocalCredentials(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("runner: no NATS credentials in %s (%s): no runner has served this data directory; start one there, or check -data: %w",
			dir, cluster.LocalCredentialsFile, err)
	}
	if err != nil {
		return fmt.Errorf("runner: NATS credentials: %w", err)
	}
	o.CredsFile, o.User, o.Password, o.Token = "", "", "", ""
	o.TLSCAFile, o.TLSCertFile, o.TLSKeyFile, o.TLSInsecureSkipVerify = "", "", "", false
	o.NKeySeedFile = c.SeedFile
	return nil
}
