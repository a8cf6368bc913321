package webindex

import (
	"bytes"

	"github.com/trickle-dev/trickle/framework"
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
	Table: TermsTable, Family: postingFamily,
	Of: func(_ []byte, col framework.Column) (string, []byte, framework.Column) {
		return ClustersTable, []byte(col.Qualifier), clusterState
	},
}

// anchorPostingGuard declares the same of a cluster's anchor postings:
// recompute writes the state in every run that writes them (recompute,
// unpost).
var anchorPostingGuard = framework.Guard{
	Table: TermsTable, Family: anchorFamily,
	Of: func(_ []byte, col framework.Column) (string, []byte, framework.Column) {
		return ClustersTable, []byte(col.Qualifier), clusterState
	},
}

// inlinkGuard declares that the inlink cell of a source on a target's row
// (in:<source>) is guarded by the source's indexed document: only the
// source's page observer writes the cell, and every run of it writes
// (or deletes) the indexed document, so two runs that write an inlink
// conflict on the source's row. A page's outlinks are an inlink cell
// each, on as many rows.
var inlinkGuard = framework.Guard{
	Table: PagesTable, Family: inlinkFamily,
	Of: func(_ []byte, col framework.Column) (string, []byte, framework.Column) {
		return PagesTable, []byte(col.Qualifier), indexed
	},
}

// topGuard and siteGuard declare that a cluster's top-list and site-list
// entries are guarded by the cluster's state cell: recompute moves them
// (setListEntries, deleteListEntries) only in runs that write the state.
// The cluster's key ends their row keys (topRow, siteRow).
var (
	topGuard = framework.Guard{
		Table: TopTable, Family: topEntry.Family,
		Of: func(row []byte, _ framework.Column) (string, []byte, framework.Column) {
			return ClustersTable, listKey(row), clusterState
		},
	}
	siteGuard = framework.Guard{
		Table: SitesTable, Family: topEntry.Family,
		Of: func(row []byte, _ framework.Column) (string, []byte, framework.Column) {
			if i := bytes.IndexByte(row, 0); i >= 0 {
				row = row[i+1:]
			}
			return ClustersTable, listKey(row), clusterState
		},
	}
)

// listKey returns the cluster key of a TopTable row. A row that is not one
// (which no writer of the index makes) maps to itself, a cluster whose
// state the writer does not write: its commit fails with
// framework.ErrUnguarded naming the row.
func listKey(row []byte) []byte {
	if _, _, key, err := parseTopRow(row); err == nil {
		return []byte(key)
	}
	return bytes.Clone(row)
}
