package remote

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// upload sends data, a request too large for one message of limit bytes,
// in parts: the open frame goes to the endpoint subj, which answers with
// an ack naming the transfer and the subject of further parts; each part
// waits for its ack, so neither side can outrun the other. The answer to
// the last part is the answer to the request. If the upload fails midway,
// the service is told to drop it.
func (r *call) upload(subj string, data []byte, limit int) (*nats.Msg, error) {
	total := len(data)
	e := getEncoder()
	defer putEncoder(e)
	f := frame{kind: frameOpen, timeout: r.timeout, total: uint64(total), sum: checksum(data)}
	e.frameHead(&f)
	n := min(total, limit-len(e.b)-partHeadroom)
	if n <= 0 {
		return nil, fmt.Errorf("remote: %s: %w: the max payload of %d bytes leaves no room for a part", r.op, ErrTooLarge, limit)
	}
	e.b = append(e.b, data[:n]...)
	what := func(seq uint64, from, to int) string {
		return fmt.Sprintf("%s: request of %d bytes, part %d (bytes %d..%d)", r.op, total, seq, from, to)
	}
	msg, err := r.roundTrip(what(0, 0, n), subj, e.b, r.partWait(n < total))
	if err != nil {
		return nil, err
	}
	var id uint64
	var partSubj string
	for off, seq := n, uint64(1); off < total; seq++ {
		ack, err := r.expectAck(msg, seq, id)
		if id == 0 && ack.kind == frameAck {
			// The first ack names the transfer; an abort may only go to a
			// subject of our service.
			if serr := r.checkPartSubject(ack.subject); serr != nil {
				return nil, fmt.Errorf("remote: %s: %w", what(seq-1, off-n, off), serr)
			}
			id, partSubj = ack.id, ack.subject
		}
		if err != nil {
			r.abort(partSubj, id)
			return nil, fmt.Errorf("remote: %s: %w", what(seq-1, off-n, off), err)
		}
		f := frame{kind: framePart, id: id, seq: seq}
		e.b = e.b[:0]
		e.frameHead(&f)
		n = min(total-off, limit-len(e.b)-partHeadroom, int(min(ack.maxChunk, uint64(total))))
		e.b = append(e.b, data[off:off+n]...)
		if msg, err = r.roundTrip(what(seq, off, off+n), partSubj, e.b, r.partWait(off+n < total)); err != nil {
			r.abort(partSubj, id)
			return nil, err
		}
		off += n
	}
	return msg, nil
}

// partWait bounds the round trip of a part of an upload: the request
// timeout, for a part the service only acknowledges (more follows); the
// call's whole time for the last, whose answer is the request's.
func (r *call) partWait(more bool) time.Duration {
	if more {
		return r.c.cfg.RequestTimeout
	}
	return 0
}

// expectAck decodes the answer to a part that is not the last: an ack of
// transfer id (any id for the open frame's, id 0) expecting part next.
func (r *call) expectAck(msg *nats.Msg, next, id uint64) (frame, error) {
	d := newDecoder(msg.Data)
	f := d.frame()
	if err := d.finish(); err != nil {
		return f, fmt.Errorf("server's acknowledgement: %w", err)
	}
	switch {
	case f.kind != frameAck:
		return f, fmt.Errorf("%w: %s frame where an acknowledgement was due", ErrProtocol, f.kind)
	case id != 0 && f.id != id:
		return f, fmt.Errorf("%w: acknowledgement of upload %d, want %d", ErrProtocol, f.id, id)
	case f.seq != next:
		return f, fmt.Errorf("%w: upload %d: acknowledgement asks for part %d, want %d", ErrProtocol, f.id, f.seq, next)
	}
	return f, nil
}

// checkPartSubject accepts only a part subject of this client's service
// and prefix, so that a confused or forged answer cannot make the client
// publish its data elsewhere.
func (r *call) checkPartSubject(subj string) error {
	token := "store"
	if r.c.svc == oracleService {
		token = "oracle"
	}
	if want := subject(r.c.cfg.SubjectPrefix, token, "part") + "."; !strings.HasPrefix(subj, want) || strings.Contains(subj[len(want):], ".") {
		return fmt.Errorf("%w: part subject %q is not %s<instance>", ErrProtocol, subj, want)
	}
	return nil
}

// download reads an answer sent in parts: first is its download frame
// (with the first chunk), and the client pulls the others one request at
// a time from the part subject. The reassembled answer must match the
// announced size and checksum.
func (r *call) download(first []byte, limit int) ([]byte, error) {
	d := newDecoder(first)
	f := d.frame()
	if err := d.finish(); err != nil {
		return nil, fmt.Errorf("remote: %s: first part of the response: %w", r.op, err)
	}
	if f.kind != frameDownload {
		return nil, fmt.Errorf("remote: %s: %w: %s frame where a response was due", r.op, ErrProtocol, f.kind)
	}
	if err := r.checkPartSubject(f.subject); err != nil {
		return nil, fmt.Errorf("remote: %s: response of %d bytes: %w", r.op, f.total, err)
	}
	if f.total > uint64(r.c.cfg.MaxBufferedBytes) {
		r.abort(f.subject, f.id)
		return nil, fmt.Errorf("remote: %s: %w: response of %d bytes exceeds the client's limit of %d bytes for messages in parts",
			r.op, ErrTooLarge, f.total, r.c.cfg.MaxBufferedBytes)
	}
	total := int(f.total)
	r.extend(total)
	buf := make([]byte, 0, total)
	buf = append(buf, f.chunk...)
	maxChunk := uint64(max(limit-maxPartHeader-partHeadroom, 1))
	e := getEncoder()
	defer putEncoder(e)
	for seq := uint64(1); len(buf) < total; seq++ {
		what := fmt.Sprintf("%s: response of %d bytes, part %d (from byte %d)", r.op, total, seq, len(buf))
		e.b = e.b[:0]
		e.frame(&frame{kind: framePull, id: f.id, seq: seq, maxChunk: maxChunk})
		msg, err := r.roundTrip(what, f.subject, e.b, r.c.cfg.RequestTimeout)
		if err != nil {
			r.abort(f.subject, f.id)
			return nil, err
		}
		d := newDecoder(msg.Data)
		c := d.frame()
		err = d.finish()
		switch {
		case err != nil:
		case c.kind != frameChunk:
			err = fmt.Errorf("%w: %s frame where a part was due", ErrProtocol, c.kind)
		case c.id != f.id || c.seq != seq:
			err = fmt.Errorf("%w: got part %d of download %d, want part %d of download %d", ErrProtocol, c.seq, c.id, seq, f.id)
		case len(buf)+len(c.chunk) > total:
			err = fmt.Errorf("%w: part of %d bytes overruns the announced %d bytes (%d received)", ErrProtocol, len(c.chunk), total, len(buf))
		}
		if err != nil {
			r.abort(f.subject, f.id)
			return nil, fmt.Errorf("remote: %s: %w", what, err)
		}
		buf = append(buf, c.chunk...)
	}
	if sum := checksum(buf); sum != f.sum {
		return nil, fmt.Errorf("remote: %s: %w: checksum %08x of the %d reassembled response bytes, want %08x", r.op, ErrProtocol, sum, total, f.sum)
	}
	return buf, nil
}

// abort tells the service to drop transfer id at once rather than at its
// deadline. It is best effort: the deadline frees the memory anyway.
func (r *call) abort(subj string, id uint64) {
	if id == 0 || subj == "" {
		return
	}
	var e encoder
	e.b = make([]byte, 0, 2+binary.MaxVarintLen64)
	e.frame(&frame{kind: frameAbort, id: id})
	_ = r.c.nc.Publish(subj, e.b)
}
