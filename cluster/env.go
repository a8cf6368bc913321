package cluster

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// EnvPrefix begins the name of every environment variable
// ConnectOptionsFromEnv reads.
const EnvPrefix = "TRICKLE_NATS_"

// The environment variables ConnectOptionsFromEnv reads: the
// deployment-facing names of the ConnectOptions fields, documented here once
// so that every command configures its NATS connection the same way.
const (
	EnvURL            = EnvPrefix + "URL"             // URLs: comma-separated server URLs
	EnvCreds          = EnvPrefix + "CREDS"           // CredsFile: credentials file (user JWT and seed)
	EnvNKey           = EnvPrefix + "NKEY"            // NKeySeedFile: user NKey seed file
	EnvUser           = EnvPrefix + "USER"            // User
	EnvPassword       = EnvPrefix + "PASSWORD"        // Password (not trimmed)
	EnvToken          = EnvPrefix + "TOKEN"           // Token
	EnvTLSCA          = EnvPrefix + "TLS_CA"          // TLSCAFile: PEM CA bundle
	EnvTLSCert        = EnvPrefix + "TLS_CERT"        // TLSCertFile: PEM client certificate
	EnvTLSKey         = EnvPrefix + "TLS_KEY"         // TLSKeyFile: PEM client key
	EnvTLSInsecure    = EnvPrefix + "TLS_INSECURE"    // TLSInsecureSkipVerify: a boolean (true/false/1/0)
	EnvName           = EnvPrefix + "NAME"            // Name: connection name
	EnvConnectTimeout = EnvPrefix + "CONNECT_TIMEOUT" // ConnectTimeout: a Go duration ("5s")
)

// envVarOf maps ConnectOptions fields to the variables they are read from,
// so that errors about options read from the environment name the variable
// the operator has to fix.
var envVarOf = map[string]string{
	"URLs":                  EnvURL,
	"CredsFile":             EnvCreds,
	"NKeySeedFile":          EnvNKey,
	"User":                  EnvUser,
	"Password":              EnvPassword,
	"Token":                 EnvToken,
	"TLSCAFile":             EnvTLSCA,
	"TLSCertFile":           EnvTLSCert,
	"TLSKeyFile":            EnvTLSKey,
	"TLSInsecureSkipVerify": EnvTLSInsecure,
	"Name":                  EnvName,
	"ConnectTimeout":        EnvConnectTimeout,
}

// ConnectOptionsFromEnv reads ConnectOptions from the Env* variables
// (TRICKLE_NATS_URL, TRICKLE_NATS_CREDS, ...), so that deployments configure
// the NATS connection the same way for every command. Unset or empty
// variables leave their field zero, for EnsureDefaults.
//
// The options read are validated as Validate would, files included, and an
// error (wrapping ErrInvalidOptions) names the variable at fault and its
// value: TRICKLE_NATS_TLS_CA naming a missing file is an error here, not a
// connection without TLS.
//
// There is deliberately no way to choose another prefix: every trickle
// command and every deployment document uses these names, and a prefix
// argument had exactly one right value while any other silently read
// nothing.
func ConnectOptionsFromEnv() (ConnectOptions, error) {
	return connectOptionsFromLookup(os.LookupEnv)
}

func connectOptionsFromLookup(lookup func(string) (string, bool)) (ConnectOptions, error) {
	get := func(name string) string {
		v, _ := lookup(name)
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
	o.Password, _ = lookup(EnvPassword)
	if v := get(EnvTLSInsecure); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return ConnectOptions{}, fmt.Errorf("%w: %s=%q is not a boolean (true, false, 1 or 0)", ErrInvalidOptions, EnvTLSInsecure, v)
		}
		o.TLSInsecureSkipVerify = b
	}
	if v := get(EnvConnectTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return ConnectOptions{}, fmt.Errorf("%w: %s=%q is not a positive duration such as \"5s\"", ErrInvalidOptions, EnvConnectTimeout, v)
		}
		o.ConnectTimeout = d
	}
	check := o
	check.EnsureDefaults()
	if err := check.validate(func(field string) string {
		if v, ok := envVarOf[field]; ok {
			return v
		}
		return field
	}); err != nil {
		return ConnectOptions{}, err
	}
	return o, nil
}
