package remote

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/micro"
)

// storeIdentity is the endpoint that names the store behind a service.
const storeIdentity = "id"

// storeHeader carries, on every request of a client that knows which store
// it expects, that store's id; a service serving another one refuses the
// request before executing it.
const storeHeader = "Trickle-Store"

// maxIdentity bounds the id and the description a service announces.
const maxIdentity = 1024

func (s *StoreService) identity(_ context.Context, d *decoder, e *encoder) error {
	if err := d.finish(); err != nil {
		return err
	}
	e.u8(wireVersion)
	e.str(s.srv.cfg.StoreID)
	e.str(s.srv.cfg.StoreWhere)
	return nil
}

// Identity asks the service which store it serves: the id and the place it
// announced (ServiceOptions.StoreID and StoreWhere), both "" if it announced none. As the first
// request of a client, it is also the check that a store service answers
// at all.
func (s *StoreClient) Identity(ctx context.Context) (id, where string, err error) {
	data, err := s.c.request(ctx, "Identity", s.identitySj, func(*encoder) {})
	if err != nil {
		return "", "", err
	}
	d := newDecoder(data)
	d.version()
	id, where = d.str(), d.str()
	if err := d.finish(); err != nil {
		return "", "", err
	}
	if len(id) > maxIdentity || len(where) > maxIdentity {
		return "", "", fmt.Errorf("remote: Identity: %w: identity longer than %d bytes", ErrProtocol, maxIdentity)
	}
	return id, where, nil
}

// Expect makes every later request carry the id of the store it is meant
// for (as Identity returned it): a service serving another store refuses
// it with ErrWrongStore before executing anything, however the request got
// there (a reconnect to another deployment's server, a service replaced
// behind the same subjects). Passing "" stops it.
func (s *StoreClient) Expect(id string) { s.c.setExpect(id) }

// Expect makes the oracle's requests carry the id of the store whose
// oracle is meant; see StoreClient.Expect.
func (o *OracleClient) Expect(id string) { o.c.setExpect(id) }

func (c *client) setExpect(id string) {
	if id == "" {
		c.expect.Store(nil)
		return
	}
	c.expect.Store(&id)
}

// misdirected reports a request meant for another store than the one this
// service serves, or nil.
func (s *server) misdirected(h micro.Headers) error {
	want := h.Get(storeHeader)
	if want == "" || want == s.cfg.StoreID {
		return nil
	}
	have := s.cfg.StoreID
	if have == "" {
		have = "an unnamed store"
	}
	return fmt.Errorf("%w: the request is for store %s; this service serves %s (%s)", ErrWrongStore, want, have, s.cfg.StoreWhere)
}
