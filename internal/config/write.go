package config

// WriteConfig shapes the write path (checkpoints written into the mount).
type WriteConfig struct{}

func defaultWrite() WriteConfig { return WriteConfig{} }

func (w *WriteConfig) validate() error { return nil }
