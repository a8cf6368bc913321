package combine

import (
	"context"

	"github.com/trickle-dev/trickle/framework"
)

// Fold runs the queue's observer on row's notification col in tx, as a
// run of it would.
func (q *Queue) Fold(ctx context.Context, tx *framework.Txn, row []byte, col framework.Column) error {
	return q.fold(ctx, tx, row, col)
}
