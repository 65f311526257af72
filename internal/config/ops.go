package config

import (
	"fmt"
	"net"
	"strconv"
)

// OpsConfig holds operational settings: metrics, warming, config file.
type OpsConfig struct {
	// MetricsAddr is where the Prometheus endpoint listens (host:port,
	// e.g. 127.0.0.1:9464 or :9464); "" serves no metrics.
	MetricsAddr string `yaml:"metrics-addr"`
	// ControlSocket: serve <cache-dir>/control.sock (owner only), through
	// which `strata warm` and `strata cache` work on a mounted cache dir.
	ControlSocket bool `yaml:"control-socket"`
	// WarmConcurrency is how many objects `strata warm` hydrates at once
	// (the fetcher's --max-fetches and --memory-limit bound the GETs and
	// the memory underneath).
	WarmConcurrency int `yaml:"warm-concurrency"`
	// WarmOnMount is a prefix of the mount (relative to its root; "/" for
	// all of it) hydrated in the background once mounted.
	WarmOnMount string `yaml:"warm-on-mount"`
	// History is how many finished mounts `strata cache stats` remembers.
	History int `yaml:"history"`

	// ConfigFile is the YAML file the settings were read from (--config);
	// it is not itself a key of the file.
	ConfigFile string `yaml:"-"`
	// PrintConfig prints the effective configuration instead of mounting.
	PrintConfig bool `yaml:"-"`
}

func (o *OpsConfig) validate() error {
	if o.MetricsAddr != "" {
		_, port, err := net.SplitHostPort(o.MetricsAddr)
		if err != nil {
			return fmt.Errorf("--metrics-addr %q: want host:port or :port (%v)", o.MetricsAddr, err)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			return fmt.Errorf("--metrics-addr %q: bad port %q", o.MetricsAddr, port)
		}
	}
	if o.WarmConcurrency < 1 || o.WarmConcurrency > 4096 {
		return fmt.Errorf("--warm-concurrency %d: want 1 to 4096", o.WarmConcurrency)
	}
	if o.History < 0 || o.History > 10000 {
		return fmt.Errorf("--history %d: want 0 to 10000", o.History)
	}
	return nil
}
