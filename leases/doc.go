// Package leases publishes and reads foreground lease files: the signal one
// process on a host sends to background loops in other processes that it is
// doing interactive work and they should yield.
//
// # Holding a lease
//
// A foreground process calls [Hold], which writes one record named
// <32 hex>.json (mode 0600) into the lease directory and refreshes it every
// [Config.Refresh] with an expiry of now + [Config.TTL] from a goroutine the
// [Lease] owns. [Lease.Close] stops the refresher and removes the file. A
// holder that crashes leaves a record that stops counting once it expires,
// and that a [Scanner] later removes.
//
//	l, err := leases.Hold(ctx, dir, leases.Config{})
//	if err != nil {
//		// sharing is off; local foreground still works
//	}
//	defer l.Close()
//
// The record is compact JSON, {"version":1,"expires_at":<unix seconds>},
// written atomically: a temp file .<name>.<32 hex>.tmp opened with
// O_EXCL|O_NOFOLLOW, written, fsynced and renamed over the lease, then the
// directory is fsynced.
//
// # Reading leases
//
// [Scanner.Active] reports whether any live lease is in the directory. It
// treats everything it reads as hostile: it inspects at most
// [Config.MaxEntries] directory entries of any kind per scan, opens only
// regular files of this user with no group or other permission bits, never
// blocks on a FIFO, reads at most 257 bytes, and counts a record only when it
// is a JSON object with version 1 and a finite expires_at in
// (now, now + 2·TTL]. Anything else is ignored; a scan never fails and never
// panics. The answer is cached for [Config.CacheInterval].
//
// # Directory
//
// On every write, remove and scan the directory is created with mode 0700
// (parents too) and checked: a symlink, a non-directory or a directory owned
// by another user is refused. [Hold] then returns an error wrapping
// [ErrUnsafeDir]; a Scanner sees no lease.
//
// # Time
//
// Expiry uses the wall clock (records are compared across processes); the
// scan cache uses the monotonic clock. A writer/reader clock skew larger than
// the TTL makes a lease look expired or too far in the future.
//
// # Concurrency
//
// A Lease and a Scanner are safe for concurrent use.
package leases
