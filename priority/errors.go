package priority

import "errors"

// ErrUnknownClass is wrapped by every error [Parse] returns for text that is
// not a class's wire name.
var ErrUnknownClass = errors.New("priority: unknown class")
