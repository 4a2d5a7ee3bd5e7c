package work

import "errors"

// ErrClosed is returned by Handle after Close.
var ErrClosed = errors.New("work: service closed")
