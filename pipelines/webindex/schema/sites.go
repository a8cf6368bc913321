package schema

import (
	"strings"
)

// SitesTable lists each site's canonicals the way TopTable lists all of
// them: its row keys are the host, a zero byte, then the cluster's top-list
// row key, so that one host's rows are contiguous and sort by inbound
// count descending, then URL. The cluster observer writes a cluster's row
// next to its top-list entry.
const SitesTable = "sites"

// SiteRow is the SitesTable row of the cluster key with the given
// canonical and inbound count.
func SiteRow(inbound int64, canonical, key string) []byte {
	b := append([]byte(HostOf(canonical)), 0)
	return append(b, TopRow(inbound, canonical, key)...)
}

// HostOf returns the host (with port, if any) of a normalized URL: what
// "site" means for browsing. Pages of one host served over http and https
// are one site.
func HostOf(u string) string {
	rest := u
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	return rest
}
