package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/trickle-dev/trickle/runner"
)

// envNames are the environment variables the flags fall back to, the
// runner's own names where the flag is the runner's.
var envNames = map[string]string{
	"data":      "TRICKLE_DATA_DIR",
	"http":      "TRICKLE_HTTP",
	"nats":      "TRICKLE_NATS_URL",
	"nats-port": "TRICKLE_NATS_PORT",
}

// parseConfig reads the flags in args, each defaulting to its environment
// variable (looked up by lookup) and then to a default of its own, so
// that this example never lands on a runner's directory or port by
// accident. -help prints the flags and returns flag.ErrHelp.
func parseConfig(args []string, lookup func(string) (string, bool)) (runner.Config, error) {
	return parseConfigTo(args, lookup, os.Stderr)
}

func parseConfigTo(args []string, lookup func(string) (string, bool), out io.Writer) (runner.Config, error) {
	var cfg runner.Config
	fs := flag.NewFlagSet("custom-runner", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&cfg.DataDir, "data", "custom-runner-data", "data directory (env "+envNames["data"]+")")
	fs.StringVar(&cfg.HTTPAddr, "http", "127.0.0.1:8081", "address of the notes API and metrics; off: none (env "+envNames["http"]+")")
	fs.StringVar(&cfg.NATSURL, "nats", "", "NATS URL of a deployment to join as a client; empty: this directory's own embedded server (env "+envNames["nats"]+")")
	fs.IntVar(&cfg.NATSPort, "nats-port", -1, "embedded NATS port; -1: any free one, announced in the data directory for its clients (env "+envNames["nats-port"]+")")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: custom-runner [flags]\n\nRuns the shouter observer; PUT /notes?id=ID with a note's text, GET /notes lists them.\n\nflags:")
		fs.PrintDefaults()
	}
	for name, env := range envNames {
		v, ok := lookup(env)
		if !ok {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return cfg, fmt.Errorf("%s=%q: %w", env, v, err)
		}
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %s (this program takes only flags; see -help)", strconv.Quote(fs.Arg(0)))
	}
	return cfg, nil
}
