package loader

import (
	"fmt"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// checkObserved refuses a DB whose commits would not notify the page
// observer: the pages would be stored but never indexed.
func checkObserved(db *framework.DB) error {
	if k, ok := db.ObservedKind(schema.PagesTable, schema.Doc); ok && k == framework.Strong {
		return nil
	}
	return fmt.Errorf("%w: the DB does not notify %s/%s, so loaded pages would never be indexed (open it with the web index's observers: webindex.Register)",
		ErrInvalidOptions, schema.PagesTable, schema.Doc)
}
