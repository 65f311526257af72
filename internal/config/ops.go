package config

// OpsConfig holds operational settings: metrics, warming, config file.
type OpsConfig struct{}

func defaultOps() OpsConfig { return OpsConfig{} }

func (o *OpsConfig) validate() error { return nil }
