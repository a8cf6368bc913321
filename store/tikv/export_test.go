package tikv

import "github.com/trickle-dev/trickle/internal/keys"

// CellKeyForTest returns the key prefix of a row of table in group g of
// namespace ns, for tests that split regions at rows.
func CellKeyForTest(ns string, g byte, table string, row []byte) []byte {
	return keys.AppendRowPrefix(newCodec(ns).ns[:len(ns)+1:len(ns)+1], keys.Group(g), table, row)
}
