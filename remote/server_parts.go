package remote

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// This file holds the service side of messages in parts: answers sent as
// downloads, uploads opened at an endpoint, and the part subject.

// respond sends the answer in e: whole if it fits in one message, else as
// the first part of a download the client pulls. asked is the timeout the
// request carried: each pull keeps the download for that long again (the
// client gives a large answer time for its size), within HandlerTimeout
// from now.
func (s *server) respond(ctx context.Context, j job, e *encoder, asked time.Duration) {
	limit := s.payloadLimit()
	if len(e.b) <= limit {
		if err := s.nc.Publish(j.reply, e.b); err != nil {
			s.log.Warn("remote: sending response", "endpoint", j.name, "err", err)
		}
		return
	}
	if s.parts == nil {
		s.fail(j.reply, j.subject, j.name, fmt.Errorf("%w: response of %d bytes exceeds the max payload of %d", ErrTooLarge, len(e.b), limit))
		return
	}
	life := s.cfg.HandlerTimeout
	if dl, ok := ctx.Deadline(); ok {
		life = time.Until(dl)
	}
	f := frame{kind: frameDownload, total: uint64(len(e.b)), subject: s.partSubject}
	fe := getEncoder()
	defer putEncoder(fe)
	fe.frameHead(&f) // measures the header, but for the id (one byte while 0)
	chunk := limit - len(fe.b) - binary.MaxVarintLen64 - partHeadroom
	if chunk <= 0 {
		s.fail(j.reply, j.subject, j.name, fmt.Errorf("%w: max payload of %d bytes leaves no room for a part", ErrTooLarge, limit))
		return
	}
	idle := s.cfg.HandlerTimeout
	if asked > 0 {
		idle = min(idle, asked)
	}
	t, first, err := s.parts.openDownload(j.name, j.subject, e.b, life, idle, s.cfg.HandlerTimeout, chunk)
	if err != nil {
		s.fail(j.reply, j.subject, j.name, err)
		return
	}
	e.b = nil // the download owns the buffer now
	f.id, f.sum, f.chunk = t.id, t.sum, first
	fe.b = fe.b[:0]
	fe.frame(&f)
	if err := s.nc.Publish(j.reply, fe.b); err != nil {
		s.parts.abort(t.id)
		s.log.Warn("remote: sending the first part of a response", "endpoint", j.name, "bytes", t.total, "err", err)
	}
}

// open starts an upload from its open frame, which reached the endpoint
// of j. It ends the request registered by begin, unless the upload is
// complete and the request is dispatched.
func (s *server) open(j job) {
	if s.parts == nil {
		defer s.end()
		s.fail(j.reply, j.subject, j.name, fmt.Errorf("%w: this service takes no messages in parts", ErrProtocol))
		return
	}
	d := newDecoder(j.data)
	f := d.frame()
	if err := d.finish(); err != nil || f.kind != frameOpen {
		defer s.end()
		if err == nil {
			err = fmt.Errorf("%w: %s frame sent to endpoint %s, want an open frame", ErrProtocol, f.kind, j.name)
		}
		s.fail(j.reply, j.subject, j.name, err)
		return
	}
	if j.reply == "" {
		s.end()
		return // nobody would send the rest
	}
	t, done, err := s.parts.openUpload(j.name, j.subject, j.h, &f, s.cfg.HandlerTimeout)
	switch {
	case err != nil:
		defer s.end()
		s.fail(j.reply, j.subject, j.name, err)
	case done:
		s.dispatch(job{name: j.name, h: j.h, data: t.buf, reply: j.reply, subject: j.subject, opened: t.opened, deadline: j.deadline})
	default:
		defer s.end()
		s.ack(j.reply, t.name, t.id, 1) // t is shared now: only immutable fields
	}
}

// ack tells the client that the parts of upload id before next arrived,
// and where and how large the next may be.
func (s *server) ack(reply, name string, id, next uint64) {
	f := frame{kind: frameAck, id: id, seq: next, subject: s.partSubject, maxChunk: s.maxChunk()}
	e := getEncoder()
	defer putEncoder(e)
	e.frame(&f)
	if err := s.nc.Publish(reply, e.b); err != nil {
		s.log.Warn("remote: acknowledging a part", "endpoint", name, "id", id, "err", err)
	}
}

// maxChunk is the largest chunk of a part this service receives: what a
// part frame's header leaves of the max payload.
func (s *server) maxChunk() uint64 {
	return uint64(max(s.payloadLimit()-maxPartHeader-partHeadroom, 1))
}

// maxPartHeader bounds the header of a part, pull or chunk frame: version,
// kind and two varints.
const maxPartHeader = 2 + 2*binary.MaxVarintLen64

// onPart handles a frame on the part subject: a further part of an
// upload, a pull of a download's next part, or an abort.
func (s *server) onPart(msg *nats.Msg) {
	if !s.begin() {
		s.fail(msg.Reply, s.partSubject, "part", fmt.Errorf("%w: service stopping", ErrUnavailable))
		return
	}
	d := newDecoder(msg.Data)
	f := d.frame()
	if err := d.finish(); err != nil {
		defer s.end()
		s.fail(msg.Reply, s.partSubject, "part", err)
		return
	}
	switch f.kind {
	case framePart:
		t, done, err := s.parts.addPart(&f)
		switch {
		case err != nil:
			defer s.end()
			name, subject := "part", s.partSubject
			if t != nil {
				name, subject = t.name, t.subject
			}
			s.fail(msg.Reply, subject, name, err)
		case done:
			s.dispatch(job{name: t.name, h: t.h, data: t.buf, reply: msg.Reply, subject: t.subject, opened: t.opened, deadline: deadline(msg.Header.Get)})
		default:
			defer s.end()
			s.ack(msg.Reply, t.name, t.id, f.seq+1)
		}
	case framePull:
		defer s.end()
		limit := max(s.payloadLimit()-maxPartHeader-partHeadroom, 1)
		t, chunk, err := s.parts.pull(&f, int(min(f.maxChunk, uint64(limit))))
		if err != nil {
			name, subject := "part", s.partSubject
			if t != nil {
				name, subject = t.name, t.subject
			}
			s.fail(msg.Reply, subject, name, err)
			return
		}
		e := getEncoder()
		defer putEncoder(e)
		e.frame(&frame{kind: frameChunk, id: f.id, seq: f.seq, chunk: chunk})
		if err := s.nc.Publish(msg.Reply, e.b); err != nil {
			s.parts.abort(t.id)
			s.log.Warn("remote: sending a part of a response", "endpoint", t.name, "id", t.id, "err", err)
		}
	case frameAbort:
		defer s.end()
		s.parts.abort(f.id)
	default:
		defer s.end()
		s.fail(msg.Reply, s.partSubject, "part", fmt.Errorf("%w: %s frame sent to the part subject", ErrProtocol, f.kind))
	}
}
