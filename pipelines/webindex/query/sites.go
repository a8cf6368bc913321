package query

import (
	"fmt"
	"net/url"
	"strings"
)

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
