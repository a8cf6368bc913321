package webindex

import (
	"fmt"
	"net/url"
	"strings"
)

// SitesTable lists each site's canonicals the way TopTable lists all of
// them: its row keys are the host, a zero byte, then the cluster's top-list
// row key, so that one host's rows are contiguous and sort by inbound
// count descending, then URL. The cluster observer writes a cluster's row
// next to its top-list entry.
const SitesTable = "sites"

// siteRow is the SitesTable row of the cluster key with the given
// canonical and inbound count.
func siteRow(inbound int64, canonical, key string) []byte {
	b := append([]byte(hostOf(canonical)), 0)
	return append(b, topRow(inbound, canonical, key)...)
}

// hostOf returns the host (with port, if any) of a normalized URL: what
// "site" means for browsing. Pages of one host served over http and https
// are one site.
func hostOf(u string) string {
	rest := u
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// ErrBadSite is wrapped by the error SitePage returns for a site name it
// cannot use.
var ErrBadSite = fmt.Errorf("%w: bad site", ErrBadQuery)

// siteName turns what a user typed ("Example.org", "example.org:8080",
// "https://example.org/x") into the host SitesTable keys by.
func siteName(s string) (string, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			return "", fmt.Errorf("%w: %q: %v", ErrBadSite, s, err)
		}
		s = u.Host
	}
	s = strings.ToLower(s)
	if s == "" || strings.ContainsAny(s, "/?#\x00 ") {
		return "", fmt.Errorf("%w: %q is not a host name", ErrBadSite, s)
	}
	return s, nil
}
