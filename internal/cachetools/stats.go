package cachetools

import (
	"path/filepath"

	"github.com/stratafs/strata/cache/index"
	"github.com/stratafs/strata/internal/control"
)

// Stats is the output of `strata cache stats --json`.
type Stats struct {
	CacheDir   string    `json:"cache_dir"`
	InUseBy    string    `json:"in_use_by,omitempty"`
	Live       bool      `json:"live"` // counted by the running mount
	SizeBytes  int64     `json:"size_bytes"`
	LimitBytes int64     `json:"limit_bytes,omitempty"`
	Objects    int64     `json:"objects"`
	Blocks     int64     `json:"blocks"`
	BlockSize  int64     `json:"block_size"`
	Session    *Session  `json:"session,omitempty"`
	History    []Session `json:"history,omitempty"`
}

// CollectStats reads a cache directory: through the running mount's
// control socket when a mount holds it, from its index when nobody does,
// and from session.json when another process holds it.
func CollectStats(dir string) (Stats, error) {
	st := Stats{CacheDir: dir}
	conn, holder, err := control.Owner(dir)
	if conn != nil {
		defer conn.Close()
		if err := conn.Call(control.Request{Op: "stats"}, nil, &st); err != nil {
			return st, err
		}
		st.CacheDir, st.History = dir, ReadHistory(dir)
		return st, nil
	}
	if holder == "" && err != nil {
		return st, err
	}
	st.History = ReadHistory(dir)
	if s, ok := ReadSession(dir); ok {
		st.Session = &s
	}
	if holder != "" {
		st.InUseBy = holder
		if st.Session != nil {
			st.SizeBytes = st.Session.UsedBytes
		}
		return st, nil
	}
	ix, err := index.Open(filepath.Join(dir, "index"), index.DefaultOptions())
	if err != nil {
		return st, err
	}
	defer ix.Close()
	if f, ok, _ := ix.ReadFormat(); ok {
		st.BlockSize = f.BlockSize
	}
	err = ix.ScanBlockUsage(func(_ index.ID, blocks, bytes int64) error {
		st.Objects++
		st.Blocks += blocks
		st.SizeBytes += bytes
		return nil
	})
	return st, err
}
