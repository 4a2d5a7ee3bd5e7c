package daemon

import "errors"

// ErrConfig reports an invalid Config.
var ErrConfig = errors.New("daemon: invalid config")
