// Package config holds Strata's settings: every user-visible default in
// one table (defaults.go: Defaults for a mount, CSI for the node plugin
// and the sidecar, Tools for the other commands), the parsing of sources,
// sizes and durations the flags take, and validation that turns bad input
// into one clear sentence before anything is mounted. It has no
// dependencies inside Strata.
package config
