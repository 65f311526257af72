package config

import (
	"fmt"
	"strings"
	"time"
)

// SharedConfig configures the optional second cache tier shared by every
// mount pointing at it (--shared-cache): an S3 Express One Zone directory
// bucket or any S3-compatible bucket (an in-cluster MinIO).
type SharedConfig struct {
	// URL is s3://BUCKET[/PREFIX]; "" disables the tier.
	URL            string `yaml:"shared-cache"`
	EndpointURL    string `yaml:"shared-cache-endpoint-url"`
	Region         string `yaml:"shared-cache-region"`
	Profile        string `yaml:"shared-cache-profile"`
	ForcePathStyle bool   `yaml:"shared-cache-force-path-style"`
	// ReadOnly reads the tier but never writes it (for nodes that must
	// not be able to poison it).
	ReadOnly bool `yaml:"shared-cache-read-only"`
	// GroupSize is the target size of one shared object: whole cache
	// blocks are stored together up to it, at least one block.
	GroupSize Size `yaml:"shared-cache-group-size"`
	// Timeout bounds each tier request (to its headers, and each block of
	// its body); the origin serves the read when it passes.
	Timeout time.Duration `yaml:"shared-cache-timeout"`
	// WriteConcurrency is the number of background PUTs to the tier.
	WriteConcurrency int `yaml:"shared-cache-write-concurrency"`
	// WriteBuffer bounds the memory holding blocks waiting to be written
	// to the tier; blocks that do not fit are not written.
	WriteBuffer Size `yaml:"shared-cache-write-buffer"`
	// KeyFile holds the secret that signs and verifies the tier's records
	// (every node of the cluster must use the same one); "" leaves them
	// unsigned.
	KeyFile string `yaml:"shared-cache-key-file"`
}

// Enabled reports whether a shared cache is configured.
func (s *SharedConfig) Enabled() bool { return s.URL != "" }

// Location returns the bucket and the key prefix ("" or ending in "/")
// of --shared-cache.
func (s *SharedConfig) Location() (bucket, prefix string, err error) {
	src, err := ParseSource(s.URL)
	if err != nil {
		return "", "", fmt.Errorf("--shared-cache: %w", err)
	}
	if src.Scheme != "s3" {
		return "", "", fmt.Errorf("--shared-cache %q: want s3://BUCKET[/PREFIX] (any S3-compatible store)", s.URL)
	}
	return src.Bucket, src.Prefix, nil
}

func (s *SharedConfig) validate() error {
	if !s.Enabled() {
		for _, f := range []struct{ name, v string }{
			{"--shared-cache-endpoint-url", s.EndpointURL}, {"--shared-cache-region", s.Region}, {"--shared-cache-profile", s.Profile},
			{"--shared-cache-key-file", s.KeyFile},
		} {
			if f.v != "" {
				return fmt.Errorf("%s is set but --shared-cache is not", f.name)
			}
		}
		return nil
	}
	if _, _, err := s.Location(); err != nil {
		return err
	}
	switch {
	case s.EndpointURL != "" && !strings.HasPrefix(s.EndpointURL, "http://") && !strings.HasPrefix(s.EndpointURL, "https://"):
		return fmt.Errorf("--shared-cache-endpoint-url %q: want http://host[:port] or https://host[:port]", s.EndpointURL)
	case s.GroupSize < 0 || s.GroupSize > 64<<20:
		return fmt.Errorf("--shared-cache-group-size %s: want at most 64MiB (one block per object below the block size)", s.GroupSize)
	case s.Timeout < 10*time.Millisecond || s.Timeout > 5*time.Minute:
		return fmt.Errorf("--shared-cache-timeout %s: want 10ms to 5m", s.Timeout)
	case s.WriteConcurrency < 1 || s.WriteConcurrency > 256:
		return fmt.Errorf("--shared-cache-write-concurrency %d: want 1 to 256", s.WriteConcurrency)
	case s.WriteBuffer < 1<<20:
		return fmt.Errorf("--shared-cache-write-buffer %s: want at least 1MiB", s.WriteBuffer)
	}
	return nil
}
