// Package csi is Strata's Kubernetes CSI node plugin: the Identity and
// Node services of a node-only driver (plus the one Controller RPC that
// csi-sanity needs), the parsing of volume attributes and secrets into
// `strata mount` arguments and environment, and the two ways a volume
// reaches a pod:
//
//   - sidecar mode: NodePublishVolume opens /dev/fuse, mounts the target
//     with fd=N and hands the descriptor (SCM_RIGHTS) plus the mount
//     arguments (JSON) over a SOCK_SEQPACKET unix socket in a directory
//     shared with the pod to `strata sidecar`, which serves it unprivileged
//     (handoff.go, sidecar.go); the plugin keeps its copy of the
//     descriptor while that connection lives and registers the sidecar's
//     cache files on it for FUSE passthrough (backing.go; the sidecar's
//     end is pluginconn.go);
//   - node mode: one privileged `strata mount` per distinct volume on the
//     node, bind-mounted into every pod that uses it and stopped when the
//     last one leaves (nodemode.go).
//
// Files: driver.go (options, gRPC serving), node.go (the RPCs and their
// argument checks), attrs.go (volume attributes and secrets), policy.go
// (the tenant model: what an inline volume, a PersistentVolume and only
// the driver may set), cachekey.go (which node-mode volumes share a cache
// directory), mountutil.go (mountinfo, mount(2), binds). It also owns reading a container's cgroup
// memory limit (memlimit.go), which the sidecar uses to bound its memory
// by default.
//
// State: sidecar-mode hand-offs live in memory (a restarted plugin only
// unmounts what it finds); node-mode sharing lives on disk under the state
// directory (one file per bind target), so a restarted plugin still knows
// who uses each shared mount.
//
// Lock order: Driver.busy (a per-target try-lock: a second RPC on the same
// target gets Aborted, as CSI asks) -> nodeShares.lock(key) (a per-volume
// mutex serialising start and stop of one shared mount) -> Driver.mu and
// nodeShares.mu (maps only, never held across I/O or a child process).
// The per-target and per-volume locks are held across the mount they
// serialise; they are per-object locks, never one global mutex.
package csi
