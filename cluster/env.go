package cluster

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// DefaultEnvPrefix is the prefix ConnectOptionsFromEnv uses when given "",
// so that every trickle command reads the same variables.
const DefaultEnvPrefix = "TRICKLE_NATS"

// Environment variable suffixes read by ConnectOptionsFromEnv, each joined to
// the prefix with "_" (TRICKLE_NATS_URL, ...). They are the deployment-facing
// names of the ConnectOptions fields, documented here once.
const (
	EnvURL            = "URL"             // URLs: comma-separated server URLs
	EnvCreds          = "CREDS"           // CredsFile: credentials file
	EnvNKey           = "NKEY"            // NKeySeedFile: NKey seed file
	EnvUser           = "USER"            // User
	EnvPassword       = "PASSWORD"        // Password
	EnvToken          = "TOKEN"           // Token
	EnvTLSCA          = "TLS_CA"          // TLSCAFile: PEM CA bundle
	EnvTLSCert        = "TLS_CERT"        // TLSCertFile: PEM client certificate
	EnvTLSKey         = "TLS_KEY"         // TLSKeyFile: PEM client key
	EnvTLSInsecure    = "TLS_INSECURE"    // TLSInsecureSkipVerify: a boolean (true/false/1/0)
	EnvName           = "NAME"            // Name: connection name
	EnvConnectTimeout = "CONNECT_TIMEOUT" // ConnectTimeout: a Go duration ("5s")
)

// ConnectOptionsFromEnv reads ConnectOptions from environment variables named
// prefix + "_" + one of the Env* suffixes (with prefix "" meaning
// DefaultEnvPrefix), so that deployments configure the NATS connection the
// same way for every command. Unset or empty variables leave their field
// zero, for EnsureDefaults. Only malformed booleans and durations are
// errors here; Validate checks the rest.
func ConnectOptionsFromEnv(prefix string) (ConnectOptions, error) {
	return connectOptionsFromLookup(prefix, os.LookupEnv)
}

func connectOptionsFromLookup(prefix string, lookup func(string) (string, bool)) (ConnectOptions, error) {
	if prefix == "" {
		prefix = DefaultEnvPrefix
	}
	prefix = strings.TrimSuffix(prefix, "_") + "_"
	get := func(suffix string) string {
		v, _ := lookup(prefix + suffix)
		return strings.TrimSpace(v)
	}
	o := ConnectOptions{
		URLs:         get(EnvURL),
		CredsFile:    get(EnvCreds),
		NKeySeedFile: get(EnvNKey),
		User:         get(EnvUser),
		Token:        get(EnvToken),
		TLSCAFile:    get(EnvTLSCA),
		TLSCertFile:  get(EnvTLSCert),
		TLSKeyFile:   get(EnvTLSKey),
		Name:         get(EnvName),
	}
	// A password may legitimately begin or end with spaces.
	o.Password, _ = lookup(prefix + EnvPassword)
	if v := get(EnvTLSInsecure); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return ConnectOptions{}, fmt.Errorf("%w: %s%s=%q is not a boolean", ErrInvalidOptions, prefix, EnvTLSInsecure, v)
		}
		o.TLSInsecureSkipVerify = b
	}
	if v := get(EnvConnectTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return ConnectOptions{}, fmt.Errorf("%w: %s%s=%q is not a positive duration such as \"5s\"", ErrInvalidOptions, prefix, EnvConnectTimeout, v)
		}
		o.ConnectTimeout = d
	}
	return o, nil
}
