package fs

import "context"

// uninterrupted is ctx without the FUSE request's cancellation. The
// kernel turns any signal the calling thread handles (the Go runtime's
// SIGURG every few milliseconds, Python's SIGCHLD from DataLoader
// workers) into a FUSE INTERRUPT, and go-fuse cancels the request's
// context; a lookup or listing aborted for it would answer EINTR, which
// programs do not expect from a file system and a raw getdents loop does
// not retry. Namespace operations therefore run to completion, bounded by
// the backend's own timeouts (an unanswered request fails as unavailable),
// not by the caller's signals. A fatal signal needs no answer: the kernel
// stops waiting for the reply and the process exits.
func uninterrupted(ctx context.Context) context.Context {
	return context.WithoutCancel(ctx)
}
