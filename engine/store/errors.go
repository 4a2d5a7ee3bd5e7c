package store

import (
	"errors"
	"fmt"
)

// Errors returned by the store. The engine service maps them to wire codes
// with Code (or errors.Is / errors.As itself):
//
//	ErrInvalid, ErrNoCatalog      → 400 bad request
//	ErrNotFound                   → 404 not found
//	ErrTooLarge, *LimitError      → 413 too large
//	ErrClosed                     → 503 (the engine is shutting down)
//	ErrLayout, anything else      → 500 internal
//
// Every error the store returns wraps one of these sentinels (or is a ctx
// error), with a message that names the offending field.
var (
	// ErrClosed is returned by every call after Close.
	ErrClosed = errors.New("store: closed")
	// ErrNotFound reports an absent node, edge, KV key or catalog entry.
	ErrNotFound = errors.New("store: not found")
	// ErrInvalid reports an invalid argument (empty id, bad graph name,
	// props that are not a JSON object, unknown batch op, ...). Nothing was
	// written.
	ErrInvalid = errors.New("store: invalid argument")
	// ErrTooLarge reports a field over its size limit. Nothing was written.
	// Errors carrying it are *LimitError values.
	ErrTooLarge = errors.New("store: too large")
	// ErrNoCatalog is returned by Reshard, CatalogAssign and
	// RebalanceExecute when no tenant catalog is attached.
	ErrNoCatalog = errors.New("store: online reshard requires an attached tenant catalog (set EDICT_TENANT_CATALOG=1)")
	// ErrLayout reports a shard layout on disk that Open refuses; the
	// message names the fix (edict migrate-shards).
	ErrLayout = errors.New("store: shard layout")
)

// LimitError reports a field over its size limit. errors.Is(err,
// ErrTooLarge) holds for it.
type LimitError struct {
	// Field is the wire field name ("id", "props", "key", "value", ...).
	Field string
	// Size is the size found and Limit the largest allowed, in bytes (or
	// items, for counts).
	Size, Limit int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("store: %s too large: %d > %d", e.Field, e.Size, e.Limit)
}

// Unwrap returns ErrTooLarge.
func (e *LimitError) Unwrap() error { return ErrTooLarge }

// Code returns the wire error code for err: 400, 404, 413, 503 or 500 (see
// the table on the error variables); 0 for a nil error.
func Code(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrTooLarge):
		return 413
	case errors.Is(err, ErrNotFound):
		return 404
	case errors.Is(err, ErrInvalid), errors.Is(err, ErrNoCatalog):
		return 400
	case errors.Is(err, ErrClosed):
		return 503
	default:
		return 500
	}
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

func tooLarge(field string, size, limit int) error {
	return &LimitError{Field: field, Size: size, Limit: limit}
}
