package scanner

// HeldRows is how many busy hinted rows the scanner has noted (see
// hints.held).
func (s *Scanner) HeldRows() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.hints.held)
}
