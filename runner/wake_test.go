package runner

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/trickle-dev/trickle/framework"
)

// A wake-up carries the notified rows, binary ones included; it leaves
// them out (the receivers then look everywhere) when there are none or too
// many to fit, and a list the receiver cannot read is an error, never a
// guess.
func TestWakeRows(t *testing.T) {
	rows := []framework.NotifiedRow{
		{Table: "pages", Row: []byte("http://a.example/")},
		{Table: "t\x00x", Row: []byte{0, 1, 0xff}},
	}
	got, err := decodeWake(encodeWake(rows))
	if err != nil || len(got) != 2 {
		t.Fatalf("round trip: %v %v", got, err)
	}
	for i := range rows {
		if got[i].Table != rows[i].Table || !bytes.Equal(got[i].Row, rows[i].Row) {
			t.Errorf("row %d: %q/%q, want %q/%q", i, got[i].Table, got[i].Row, rows[i].Table, rows[i].Row)
		}
	}
	if b := encodeWake(nil); b != nil {
		t.Errorf("no rows encoded as %x", b)
	}
	var many []framework.NotifiedRow
	for i := range 1000 {
		many = append(many, framework.NotifiedRow{Table: "pages", Row: []byte(fmt.Sprintf("%s%d", strings.Repeat("x", 20), i))})
	}
	if b := encodeWake(many); b != nil {
		t.Errorf("%d rows (over %d bytes) encoded in %d bytes, want left out", len(many), maxWakeBytes, len(b))
	}
	if got, err := decodeWake(nil); got != nil || err != nil {
		t.Errorf("empty wake-up: %v %v, want no rows", got, err)
	}
	good := encodeWake(rows)
	for name, b := range map[string][]byte{
		"unknown version": append([]byte{wakeVersion + 1}, good[1:]...),
		"truncated":       good[:len(good)-1],
		"empty row":       encodeWake([]framework.NotifiedRow{{Table: "t", Row: nil}}),
	} {
		if got, err := decodeWake(b); err == nil {
			t.Errorf("%s: decoded %v, want an error", name, got)
		}
	}
}

// A process ignores the echo of its own wake-up (its scanners were told
// already), takes the rows another process's names, and looks everywhere
// when one cannot be read.
func TestHeardWake(t *testing.T) {
	me := &Node{cfg: Deployment{Namespace: "ns"}, wakeID: newWakeID()}
	other := &Node{cfg: Deployment{Namespace: "ns"}, wakeID: newWakeID()}
	rows := []framework.NotifiedRow{{Table: "pages", Row: []byte("http://a.example/")}}
	if _, mine, _ := heardWake(me.wakeMsg(rows), me.wakeID); !mine {
		t.Error("own wake-up not recognized as the echo")
	}
	got, mine, err := heardWake(other.wakeMsg(rows), me.wakeID)
	if mine || err != nil || len(got) != 1 || got[0].Table != "pages" || !bytes.Equal(got[0].Row, rows[0].Row) {
		t.Errorf("another process's wake-up: rows %v, mine %v, err %v; want its row", got, mine, err)
	}
	bad := other.wakeMsg(rows)
	bad.Data = bad.Data[:len(bad.Data)-1]
	if got, mine, err := heardWake(bad, me.wakeID); mine || got != nil || err == nil {
		t.Errorf("unreadable wake-up: rows %v, mine %v, err %v; want no rows (a pass) and the error", got, mine, err)
	}
	if got, mine, err := heardWake(other.wakeMsg(nil), me.wakeID); mine || got != nil || err != nil {
		t.Errorf("wake-up naming no rows: rows %v, mine %v, err %v; want a pass", got, mine, err)
	}
}
