package catalog

import "errors"

// Errors returned by the catalog.
var (
	// ErrClosed is returned by writes after Close.
	ErrClosed = errors.New("catalog: closed")
	// ErrInvalid reports an invalid graph key or a corrupt stored row.
	ErrInvalid = errors.New("catalog: invalid entry")
	// ErrFull reports that the catalog already holds MaxEntries entries.
	ErrFull = errors.New("catalog: too many entries")
	// ErrNotFound is returned by Reassign for a graph without an entry.
	ErrNotFound = errors.New("catalog: no entry")
)
