package codec

import (
	"encoding/binary"
	"errors"
	"testing"
)

func TestReadsWhatAppendWrote(t *testing.T) {
	var b []byte
	b = append(b, 7)
	b = binary.AppendUvarint(b, 300)
	b = binary.AppendVarint(b, -5)
	b = binary.BigEndian.AppendUint64(b, 1<<60)
	b = binary.AppendUvarint(b, 3)
	b = append(b, "abc"...)
	b = append(b, "tail"...)
	r := NewReader(b)
	if r.Byte() != 7 || r.Uvarint() != 300 || r.Varint() != -5 || r.U64() != 1<<60 || r.String() != "abc" {
		t.Fatal("values read back differ")
	}
	tail := r.Take(4)
	if string(tail) != "tail" || r.Len() != 0 || r.Err() != nil {
		t.Fatalf("tail %q, left %d, err %v", tail, r.Len(), r.Err())
	}
	// What Take returns cannot grow into what follows it.
	r = NewReader([]byte("abcdef"))
	p := r.Take(3)
	_ = append(p, 'X')
	if rest := r.Take(3); string(rest) != "def" || cap(p) != 3 {
		t.Fatalf("Take's slice has capacity %d; the rest reads %q", cap(p), rest)
	}
}

func TestTruncatedInputFailsOnce(t *testing.T) {
	for name, read := range map[string]func(*Reader){
		"byte":    func(r *Reader) { r.Byte() },
		"uvarint": func(r *Reader) { r.Uvarint() },
		"varint":  func(r *Reader) { r.Varint() },
		"u64":     func(r *Reader) { r.U64() },
		"bytes":   func(r *Reader) { r.Bytes() },
	} {
		r := NewReader(nil)
		read(&r)
		if !errors.Is(r.Err(), ErrTruncated) {
			t.Errorf("%s of nothing: %v", name, r.Err())
		}
	}
	// A length past the end fails, and later reads return zero values.
	r := NewReader(binary.AppendUvarint(nil, 10))
	if b := r.Bytes(); b != nil || !errors.Is(r.Err(), ErrTruncated) {
		t.Fatalf("overlong length: %q %v", b, r.Err())
	}
	first := r.Err()
	r.Fail(errors.New("later"))
	if r.Err() != first || r.Uvarint() != 0 {
		t.Fatal("the first problem was not kept")
	}
}
