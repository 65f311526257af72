package config

import (
	"fmt"
	"time"
)

// WriteConfig shapes the write path (checkpoints written into the mount).
type WriteConfig struct {
	// Upload is "sync" (close and fsync return once the object is in the
	// bucket) or "async" (close returns once the data is durable on the
	// cache disk and journaled; uploads run in the background).
	Upload            string `yaml:"upload"`
	UploadConcurrency int    `yaml:"upload-concurrency"`
	UploadPartSize    Size   `yaml:"upload-part-size"`
	// UploadDelay (async): an upload starts once its file has been closed
	// this long and its directory has been quiet as long, so a directory
	// written and then renamed is renamed before anything goes up.
	UploadDelay time.Duration `yaml:"upload-delay"`
	// RenameDirLimit is the most objects a directory rename copies
	// server-side; beyond it rename returns EXDEV and mv copies itself.
	RenameDirLimit int `yaml:"rename-dir-limit"`
}

func (w *WriteConfig) validate() error {
	switch {
	case w.Upload != "sync" && w.Upload != "async":
		return fmt.Errorf("--upload %q: want sync or async", w.Upload)
	case w.UploadConcurrency < 1 || w.UploadConcurrency > 256:
		return fmt.Errorf("--upload-concurrency %d: want 1 to 256", w.UploadConcurrency)
	case w.UploadPartSize != 0 && w.UploadPartSize < 5<<20:
		return fmt.Errorf("--upload-part-size %s: want 0 (automatic) or at least 5MiB", w.UploadPartSize)
	case w.UploadDelay < 0:
		return fmt.Errorf("--upload-delay %s: want 0 (upload at once) or more", w.UploadDelay)
	case w.RenameDirLimit < 0:
		return fmt.Errorf("--rename-dir-limit %d: want 0 or more", w.RenameDirLimit)
	}
	return nil
}
