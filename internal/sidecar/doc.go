// Package sidecar is `strata sidecar`: run unprivileged in the workload
// pod, it takes each volume the CSI node plugin mounted in sidecar mode
// (the /dev/fuse descriptor and the mount options, handed over on a unix
// socket in the shared emptyDir, see internal/csi), serves it with
// internal/mount as /dev/fd/N, and reports ready or the error back to the
// plugin. Probe is the pod's startup probe.
//
// Locks: sidecar.startMu serialises the starts of volumes, because a
// hand-off's credentials reach the backend through the process
// environment while it is built; it is held across the backend's build
// and check (network I/O), which is what it guards, and nothing else
// takes it.
//
// sidecar may import internal/mount, internal/csi and internal/config.
package sidecar
