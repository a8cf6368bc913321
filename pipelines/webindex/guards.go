package webindex

import (
	"bytes"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// guards are the index's guarded families (framework.Guard): cells that
// every transaction writing them writes with another cell, their guard, so
// that a one-phase commit checks the guard for them instead of each one.
// They are the cells the observers write most: a cluster's postings (some
// ninety per page), a page's inlink cells (one per outlink) and the
// top-list and site-list entries a cluster moves whenever its inbound
// count changes.
var guards = []framework.Guard{postingGuard, anchorPostingGuard, inlinkGuard, topGuard, siteGuard}

// postingGuard declares that the posting of a cluster in a term's row is
// guarded by the cluster's state cell: recompute writes the state in every
// run that writes postings (post, unpost), so two runs that write a
// posting conflict on the state.
var postingGuard = framework.Guard{
	Table: schema.TermsTable, Family: schema.PostingFamily,
	Of: func(_ []byte, col framework.Column) (string, []byte, framework.Column) {
		return schema.ClustersTable, []byte(col.Qualifier), schema.ClusterState
	},
}

// anchorPostingGuard declares the same of a cluster's anchor postings:
// recompute writes the state in every run that writes them (recompute,
// unpost).
var anchorPostingGuard = framework.Guard{
	Table: schema.TermsTable, Family: schema.AnchorFamily,
	Of: func(_ []byte, col framework.Column) (string, []byte, framework.Column) {
		return schema.ClustersTable, []byte(col.Qualifier), schema.ClusterState
	},
}

// inlinkGuard declares that the inlink cell of a source on a target's row
// (in:<source>) is guarded by the source's indexed document: only the
// source's page observer writes the cell, and every run of it writes
// (or deletes) the indexed document, so two runs that write an inlink
// conflict on the source's row. A page's outlinks are an inlink cell
// each, on as many rows.
var inlinkGuard = framework.Guard{
	Table: schema.PagesTable, Family: schema.InlinkFamily,
	Of: func(_ []byte, col framework.Column) (string, []byte, framework.Column) {
		return schema.PagesTable, []byte(col.Qualifier), schema.Indexed
	},
}

// topGuard and siteGuard declare that a cluster's top-list and site-list
// entries are guarded by the cluster's state cell: recompute moves them
// (SetListEntries, DeleteListEntries) only in runs that write the state.
// The cluster's key ends their row keys (TopRow, SiteRow).
var (
	topGuard = framework.Guard{
		Table: schema.TopTable, Family: schema.TopEntry.Family,
		Of: func(row []byte, _ framework.Column) (string, []byte, framework.Column) {
			return schema.ClustersTable, listKey(row), schema.ClusterState
		},
	}
	siteGuard = framework.Guard{
		Table: schema.SitesTable, Family: schema.TopEntry.Family,
		Of: func(row []byte, _ framework.Column) (string, []byte, framework.Column) {
			if i := bytes.IndexByte(row, 0); i >= 0 {
				row = row[i+1:]
			}
			return schema.ClustersTable, listKey(row), schema.ClusterState
		},
	}
)

// listKey returns the cluster key of a TopTable row. A row that is not one
// (which no writer of the index makes) maps to itself, a cluster whose
// state the writer does not write: its commit fails with
// framework.ErrUnguarded naming the row.
func listKey(row []byte) []byte {
	if _, _, key, err := schema.ParseTopRow(row); err == nil {
		return []byte(key)
	}
	return bytes.Clone(row)
}
