package schema

import (
	"errors"
	"slices"
	"testing"

	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

func TestDocumentEncodings(t *testing.T) {
	p := &extract.Page{URL: "http://a.example/", Title: "T", Text: "text",
		Links:       []extract.Link{{Target: "http://b.example/", Anchor: "one"}},
		MoreAnchors: []extract.Link{{Target: "http://b.example/", Anchor: "two"}}}
	got, err := DecodeDoc(EncodeDoc(p))
	if err != nil || got.Title != "T" || !slices.Equal(got.Links, p.Links) || !slices.Equal(got.MoreAnchors, p.MoreAnchors) {
		t.Errorf("round trip = %+v, %v", got, err)
	}
	// The first encoding: no MoreAnchors after the links.
	v1 := []byte{docVersionOneAnchor}
	for _, s := range []string{p.URL, p.Title, p.Text} {
		v1 = AppendString(v1, s)
	}
	v1 = append(v1, 1)
	v1 = AppendString(AppendString(v1, "http://b.example/"), "one")
	got, err = DecodeDoc(v1)
	if err != nil || !slices.Equal(got.Links, p.Links) || got.MoreAnchors != nil {
		t.Errorf("first encoding = %+v, %v", got, err)
	}
	for _, bad := range [][]byte{nil, {9}, v1[:len(v1)-1], append(EncodeDoc(p), 0), append([]byte{docVersion}, v1[1:]...)} {
		if _, err := DecodeDoc(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decodeDoc(%q) = %v, want ErrCorrupt", bad, err)
		}
	}
}

func TestAnchorEncodings(t *testing.T) {
	for _, as := range [][]string{nil, {"one"}, {"one", "two"}, {"\xffx"}, {""}} {
		b := EncodeAnchors(as)
		got, err := DecodeAnchors(b)
		want := as
		if len(as) == 1 && as[0] == "" {
			want = nil
		}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("anchors %q: encoded %q, decoded %q, %v", as, b, got, err)
		}
	}
	if b := EncodeAnchors([]string{"one"}); string(b) != "one" {
		t.Errorf("one anchor is stored as %q, not as its text (the old format)", b)
	}
	for _, bad := range [][]byte{{anchorsMark}, {anchorsMark, 0}, {anchorsMark, 2, 1, 'a'}} {
		if _, err := DecodeAnchors(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decodeAnchors(%q) = %v, want ErrCorrupt", bad, err)
		}
	}
}
