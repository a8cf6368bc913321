package schema

import (
	"encoding/binary"
	"errors"
	"testing"
)

func TestDecoderReadsWhatTheEncodersWrite(t *testing.T) {
	b := binary.AppendUvarint(nil, 300)
	b = binary.AppendVarint(b, -5)
	b = binary.BigEndian.AppendUint64(b, 1<<60)
	b = AppendString(b, "abc")
	d := NewDecoder(b)
	if d.Uvarint() != 300 || d.Varint() != -5 || d.U64() != 1<<60 || d.String() != "abc" || d.Len() != 0 || d.Err() != nil {
		t.Fatalf("values read back differ, or %d bytes left, or %v", d.Len(), d.Err())
	}
}

func TestDecoderFailsOnceOnTruncatedInput(t *testing.T) {
	full := AppendString(binary.BigEndian.AppendUint64(binary.AppendVarint(binary.AppendUvarint(nil, 300), -5), 7), "abc")
	for n := range len(full) {
		d := NewDecoder(full[:n])
		d.Uvarint()
		d.Varint()
		d.U64()
		if s := d.String(); s != "" || !errors.Is(d.Err(), ErrCorrupt) || d.Len() != 0 {
			t.Fatalf("%d of %d bytes: string %q, err %v, %d bytes left", n, len(full), s, d.Err(), d.Len())
		}
	}
}
