// Package faults wraps any backend.Backend to inject latency and failures,
// for tests and benchmarks of the layers above (cache, prefetch, fs): fixed
// latency plus jitter, transient errors (wrapping backend.ErrUnavailable),
// ReadRange bodies that are reset or truncated after some bytes, and
// per-operation hooks that decide a fault for one call precisely.
//
// Random faults are deterministic for a seed: each decision is a hash of
// the seed, the call (operation, key, version, range) and how many times
// that same call was made before, so the same sequence of calls fails the
// same way in every run, whatever the goroutine interleaving across
// different calls. A retry of a call is a new occurrence and draws anew.
//
// Every injected error wraps ErrInjected, so a test can tell injected
// failures from real ones. Counters of injected faults are in Stats.
//
// New returns the controller (Update, SetHook, Stats). Its Backend method
// is what to hand to the layers above: it implements Checker, Writer,
// Copier and Deleter exactly where the inner backend does (built with
// backend.Compose), so a read-only inner stays read-only; Closer always.
// String is the inner backend's: a wrapper changes no cache identity.
//
// Lock order: Backend.mu (options and hooks; a snapshot is taken, never
// held across a call), then Backend.seqMu (occurrence counts, map
// operations only). No lock is held while sleeping or calling the inner
// backend; counters are atomics.
package faults
