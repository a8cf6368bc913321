package store

// The functions below validate requests exactly as DB does, so that every
// Store implementation rejects the same requests with the same
// *InvalidError: callers (and tests comparing stores) cannot tell stores
// apart by their errors. groups describes a store's locality groups the way
// Options.Groups does: it maps families to group names, every other family
// is in DefaultGroup, and the groups are DefaultGroup and the names it maps
// to.

// ValidateApply reports what Apply would reject txn for, or nil.
func ValidateApply(txn *RowTxn) error { return validateTxn(txn) }

// ValidateApplyAll reports what ApplyAll would reject txns for, or nil.
func ValidateApplyAll(txns []*RowTxn) error { return validateAll("ApplyAll", txns) }

// ValidateReadRow reports what ReadRow would reject its arguments for, or
// nil.
func ValidateReadRow(table string, row []byte, cols []Column, spans []Span, groups map[string]string) error {
	return validateRead("ReadRow", -1, table, row, cols, spans, groupOf(groups))
}

// ValidateReadRows reports what ReadRows would reject reads for, or nil.
func ValidateReadRows(reads []RowRead, groups map[string]string) error {
	const op = "ReadRows"
	if len(reads) > MaxRowReads {
		return invalid(op, "reads", "%d reads, more than MaxRowReads (%d) in one call", len(reads), MaxRowReads)
	}
	g := groupOf(groups)
	for i := range reads {
		r := &reads[i]
		if err := validateRead(op, i, r.Table, r.Row, r.Columns, r.Spans, g); err != nil {
			return err
		}
	}
	return nil
}

// ValidateScan reports what Scan would reject req for, or nil.
func ValidateScan(req ScanRequest, groups map[string]string) error {
	return validateScan(req, groupOf(groups), func(name string) bool { return knownGroup(name, groups) })
}

// ValidateTables reports what Tables would reject group for, or nil.
func ValidateTables(group string, groups map[string]string) error {
	if !knownGroup(group, groups) {
		return invalid("Tables", "group", "unknown group %q", group)
	}
	return nil
}

// groupOf returns the group-name lookup that groups describes.
func groupOf(groups map[string]string) func(string) string {
	return func(family string) string {
		if g, ok := groups[family]; ok {
			return g
		}
		return DefaultGroup
	}
}

// knownGroup reports whether name ("" meaning DefaultGroup) is a group of
// groups.
func knownGroup(name string, groups map[string]string) bool {
	if name == "" || name == DefaultGroup {
		return true
	}
	for _, g := range groups {
		if g == name {
			return true
		}
	}
	return false
}
