package tikvtest

import "bytes"

// A transaction's rollback record of a key sits at the key's version of
// its start timestamp, and a commit record at the version of its commit
// timestamp. Timestamps PD hands out are all distinct, so in two-phase
// commit the two never meet; but async commit and one-phase commit
// compute their commit timestamps (max_ts+1, say), which can be another
// transaction's start timestamp. The mock then overwrites one record with
// the other: a rollback erases a committed write, or a commit erases the
// rollback that kept a late prewrite out.
//
// TiKV keeps both: a rollback that lands on a commit record marks it
// (has_overlapped_rollback) instead of replacing it, and a commit over a
// rollback record keeps the mark. So does the cluster, here: the write
// stays (put back if the mock replaced it), and the rollback is noted in
// overlapped, which prewrites, CheckTxnStatus and CheckSecondaryLocks
// consult as TiKV consults the mark. Such collisions are rare, and the
// notes are never dropped.

// txnKey is a key of a transaction, by its start timestamp.
type txnKey struct {
	key string
	ts  uint64
}

// shadowed is a commit record a rollback is about to land on.
type shadowed struct {
	key []byte
	ts  uint64
	rec []byte
}

// rollingBack returns the commit records of other transactions that a
// rollback of keys by the transaction at ts would land on; rolledBack
// puts back those the rollback replaced. The caller holds m.mu.
func (m *commits) rollingBack(keys [][]byte, ts uint64) []shadowed {
	var out []shadowed
	for _, k := range keys {
		rec := m.rec.at(k, ts)
		if typ, start, ok := writeOf(rec); ok && (typ != recordRollback || start != ts) {
			out = append(out, shadowed{key: k, ts: ts, rec: rec})
		}
	}
	return out
}

func (m *commits) rolledBack(sh []shadowed) {
	for _, s := range sh {
		if cur := m.rec.at(s.key, s.ts); !bytes.Equal(cur, s.rec) {
			m.rec.put(s.key, s.ts, s.rec)
			m.overlapped[txnKey{string(s.key), s.ts}] = struct{}{}
			m.stats.overlapped.Add(1)
		}
	}
}

// committing returns the keys whose rollback record (of the transaction
// that started at commitTS) a commit of keys at commitTS would replace;
// committed notes those rollbacks as overlapped. The caller holds m.mu.
func (m *commits) committing(keys [][]byte, commitTS uint64) [][]byte {
	var out [][]byte
	for _, k := range keys {
		if typ, start, ok := writeOf(m.rec.at(k, commitTS)); ok && typ == recordRollback && start == commitTS {
			out = append(out, k)
		}
	}
	return out
}

func (m *commits) committed(keys [][]byte, commitTS uint64) {
	for _, k := range keys {
		if typ, start, ok := writeOf(m.rec.at(k, commitTS)); !ok || typ != recordRollback || start != commitTS {
			m.overlapped[txnKey{string(k), commitTS}] = struct{}{}
			m.stats.overlapped.Add(1)
		}
	}
}

// rolledBackOver reports whether the transaction at ts was rolled back on
// key where another's commit record stands.
func (m *commits) rolledBackOver(key []byte, ts uint64) bool {
	_, ok := m.overlapped[txnKey{string(key), ts}]
	return ok
}
