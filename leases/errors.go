package leases

import "errors"

// ErrUnsafeDir reports a lease directory that is a symlink, not a
// directory, owned by another user, or cannot be created.
var ErrUnsafeDir = errors.New("leases: unsafe lease directory")
