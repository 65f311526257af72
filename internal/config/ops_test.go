package config

import (
	"errors"
	"strings"
	"testing"
)

func TestOpsValidate(t *testing.T) {
	tests := []struct {
		name    string
		mut     func(*OpsConfig)
		wantErr string
	}{
		{name: "defaults"},
		{name: "metrics on all interfaces", mut: func(o *OpsConfig) { o.MetricsAddr = ":9464" }},
		{name: "metrics on loopback", mut: func(o *OpsConfig) { o.MetricsAddr = "127.0.0.1:9464" }},
		{name: "metrics on ipv6", mut: func(o *OpsConfig) { o.MetricsAddr = "[::1]:0" }},
		{name: "metrics without port", mut: func(o *OpsConfig) { o.MetricsAddr = "localhost" }, wantErr: "--metrics-addr"},
		{name: "metrics bad port", mut: func(o *OpsConfig) { o.MetricsAddr = ":http-alt" }, wantErr: "bad port"},
		{name: "metrics port too big", mut: func(o *OpsConfig) { o.MetricsAddr = ":70000" }, wantErr: "bad port"},
		{name: "warm concurrency zero", mut: func(o *OpsConfig) { o.WarmConcurrency = 0 }, wantErr: "--warm-concurrency"},
		{name: "history negative", mut: func(o *OpsConfig) { o.History = -1 }, wantErr: "--history"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			if tc.mut != nil {
				tc.mut(&c.Ops)
			}
			err := c.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			if !errors.Is(err, errBad) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate() = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
