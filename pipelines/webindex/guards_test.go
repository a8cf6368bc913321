package webindex

import (
	"bytes"
	"testing"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// TestGuardsNameTheCellsTheirWritersWrite checks each guard against the
// cell its writer writes with the guarded one: a cluster's state for its
// postings and list entries, the source's indexed document for an inlink.
// Inbound 255 puts a zero byte in the top-list row's inverted count.
func TestGuardsNameTheCellsTheirWritersWrite(t *testing.T) {
	const key = "sha256:abc"
	for _, tc := range []struct {
		name     string
		g        framework.Guard
		row      []byte
		col      framework.Column
		table    string
		guardRow string
		guardCol framework.Column
	}{
		{"posting", postingGuard, []byte("term"), framework.Column{Family: schema.PostingFamily, Qualifier: key}, schema.ClustersTable, key, schema.ClusterState},
		{"inlink", inlinkGuard, []byte("http://target.example/"), framework.Column{Family: schema.InlinkFamily, Qualifier: "http://source.example/"}, schema.PagesTable, "http://source.example/", schema.Indexed},
		{"top", topGuard, schema.TopRow(255, "http://a.example/", key), schema.TopEntry, schema.ClustersTable, key, schema.ClusterState},
		{"top, count 0", topGuard, schema.TopRow(0, "http://a.example/", key), schema.TopEntry, schema.ClustersTable, key, schema.ClusterState},
		{"site", siteGuard, schema.SiteRow(255, "http://a.example:8080/x", key), schema.TopEntry, schema.ClustersTable, key, schema.ClusterState},
		{"not a top row", topGuard, []byte("short"), schema.TopEntry, schema.ClustersTable, "short", schema.ClusterState},
	} {
		table, row, col := tc.g.Of(tc.row, tc.col)
		if table != tc.table || string(row) != tc.guardRow || col != tc.guardCol {
			t.Errorf("%s: guard of %q %v is %s/%q/%v, want %s/%q/%v", tc.name, tc.row, tc.col, table, row, col, tc.table, tc.guardRow, tc.guardCol)
		}
		if tc.col.Family != tc.g.Family {
			t.Errorf("%s: the cell's family %q is not the guarded family %q", tc.name, tc.col.Family, tc.g.Family)
		}
		if len(row) > 0 && len(tc.row) > 0 && &row[0] == &tc.row[0] {
			t.Errorf("%s: the guard's row keeps the cell's row", tc.name)
		}
	}
	if !bytes.Equal(listKey(schema.TopRow(7, "http://a.example/", key)), []byte(key)) {
		t.Error("listKey does not invert topRow")
	}
}

// TestIndexDeclaresItsGuards checks that Register declares every guard:
// commits through a registry that lacks one check the family's cells one
// by one, which no other test notices.
func TestIndexDeclaresItsGuards(t *testing.T) {
	reg := framework.NewRegistry()
	ix, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.Register(reg); err != nil {
		t.Fatal(err)
	}
	for _, g := range []framework.Guard{postingGuard, inlinkGuard, topGuard, siteGuard} {
		row, col := []byte("r"), framework.Column{Family: g.Family, Qualifier: "q"}
		table, gRow, gCol, ok := reg.GuardOf(g.Table, row, col)
		wantTable, wantRow, wantCol := g.Of(row, col)
		if !ok || table != wantTable || !bytes.Equal(gRow, wantRow) || gCol != wantCol {
			t.Errorf("%s/%s: GuardOf = %s/%q/%v, %v; want the declared guard %s/%q/%v", g.Table, g.Family, table, gRow, gCol, ok, wantTable, wantRow, wantCol)
		}
	}
}
