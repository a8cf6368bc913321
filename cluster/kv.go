package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// markerTTL is how long a bucket keeps the marker a server leaves when a key
// expires or is purged. Markers only need to outlive the odd racing Create
// (which reads the marker's revision and writes over it), so they are kept
// as briefly as the server allows, and memory does not fill with one marker
// per row ever locked.
const markerTTL = time.Second

// bucketSpec describes a coordination bucket: memory storage, one value per
// key, per-key TTLs.
type bucketSpec struct {
	name        string
	description string
	replicas    int
}

// ensureBucket creates the bucket if it does not exist, or binds to it if it
// does (created by another worker, perhaps with a different replica count),
// and checks that it supports per-key TTLs.
func ensureBucket(ctx context.Context, js jetstream.JetStream, spec bucketSpec) (jetstream.KeyValue, error) {
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:         spec.name,
		Description:    spec.description,
		History:        1,
		Storage:        jetstream.MemoryStorage,
		Replicas:       spec.replicas,
		LimitMarkerTTL: markerTTL,
	})
	switch {
	case err == nil:
		return kv, nil
	case errors.Is(err, jetstream.ErrLimitMarkerTTLNotSupported):
		return nil, fmt.Errorf("cluster: bucket %q: per-key TTLs need nats-server 2.11 or later: %w", spec.name, err)
	case !errors.Is(err, jetstream.ErrBucketExists):
		return nil, fmt.Errorf("cluster: create bucket %q: %w", spec.name, err)
	}
	kv, err = js.KeyValue(ctx, spec.name)
	if err != nil {
		return nil, fmt.Errorf("cluster: bind bucket %q: %w", spec.name, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("cluster: bucket %q status: %w", spec.name, err)
	}
	if st.LimitMarkerTTL() <= 0 {
		return nil, fmt.Errorf("cluster: bucket %q exists without per-key TTL support (LimitMarkerTTL); delete it so it can be recreated", spec.name)
	}
	return kv, nil
}

// bucketLost reports an error meaning the bucket's stream does not exist
// any more: the NATS server restarted and lost its memory-stored buckets (a
// runner took over a data directory whose owner died, with a fresh embedded
// server), or someone deleted the bucket. Writers then create it again.
func bucketLost(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrStreamNotFound) ||
		errors.Is(err, jetstream.ErrBucketNotFound)
}

// validTTL checks a TTL for a per-key expiry: the server counts message TTLs
// in whole seconds, at least one.
func validTTL(ttl time.Duration) error {
	if ttl < time.Second || ttl%time.Second != 0 {
		return errors.New("must be a whole number of seconds, at least 1s (the server counts TTLs in seconds)")
	}
	return nil
}

// kvSubject is the subject that writes key in bucket, as the KV client forms
// it: "$KV.<bucket>.<key>", behind the JetStream API prefix when js uses a
// non-default one (a domain or an import prefix).
//
// It exists because the KV API sets a per-key TTL only on Create; refreshing
// a live key with a fresh TTL takes a plain JetStream publish to this
// subject with a Nats-TTL header.
func kvSubject(js jetstream.JetStream, bucket, key string) string {
	o := js.Options()
	pfx := ""
	switch {
	case o.Domain != "":
		pfx = "$JS." + o.Domain + ".API."
	case o.APIPrefix != "" && o.APIPrefix != jetstream.DefaultAPIPrefix:
		pfx = strings.TrimSuffix(o.APIPrefix, ".") + "."
	}
	if pfx == jetstream.DefaultAPIPrefix {
		pfx = ""
	}
	return pfx + "$KV." + bucket + "." + key
}

// isWrongLastSeq reports a failed compare-and-set: the key's revision was not
// the expected one. Single-replica streams report code 10071, replicated
// ones 10164.
func isWrongLastSeq(err error) bool {
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// notFound reports a missing (never written, deleted or expired) key.
func notFound(err error) bool {
	return errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted)
}
