// Package config holds Strata's settings: every default in one place
// (Defaults), the parsing of sources, sizes and durations the flags take,
// and validation that turns bad input into one clear sentence before
// anything is mounted. It has no dependencies inside Strata.
package config
