package main

import "golang.org/x/sys/unix"

// privateFiles narrows the process's umask before a cache dir is opened:
// everything created under a cache dir (object files, staging files, and
// the index's own files, whose modes badger does not let us choose) is
// for the owner only, whatever umask the user or the container runtime
// left us. The process creates nothing meant for others afterwards (the
// CSI hand-off socket and directories are chmod'ed explicitly).
func privateFiles() { unix.Umask(0o077) }
