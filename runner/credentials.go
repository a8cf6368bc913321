package runner

import "github.com/trickle-dev/trickle/cluster"

// embeddedCredentials sets the credentials the embedded server of the data
// directory dir requires.
func embeddedCredentials(o *cluster.EmbeddedOptions, dir string) error { return nil }

// localCredentials adds to o the credentials of the embedded server of the
// data directory dir, unless o carries credentials of its own.
func localCredentials(o *cluster.ConnectOptions, dir string) error { return nil }
