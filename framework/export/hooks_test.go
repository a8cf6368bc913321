package export

// SetFault makes s call fault before publishing the i-th message of each
// round, failing the batch there if it returns an error: how a test
// fails a batch half-way.
func SetFault(s *JetStreamSink, fault func(i int) error) { s.c.fault = fault }
