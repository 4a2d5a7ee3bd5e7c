package service

import "errors"

var (
	// ErrConfig reports an invalid Config.
	ErrConfig = errors.New("service: invalid config")
)
