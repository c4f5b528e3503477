package store

import "errors"

// Sentinel errors. Implementations wrap them with context; callers test with errors.Is.
var (
	// ErrNotFound is returned when the requested row does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict is returned when a write would violate a uniqueness rule, or when the
	// condition of a conditional write no longer holds.
	ErrConflict = errors.New("conflict")
	// ErrClosed is returned by every method called after Close.
	ErrClosed = errors.New("store closed")
)

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
