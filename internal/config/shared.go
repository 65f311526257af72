package config

// SharedConfig configures the optional second cache tier shared by every
// mount pointing at it (--shared-cache).
type SharedConfig struct{}

func defaultShared() SharedConfig { return SharedConfig{} }

func (s *SharedConfig) validate() error { return nil }
