package mount

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratafs/strata/internal/config"
	"github.com/stratafs/strata/internal/control"
	"github.com/stratafs/strata/internal/warm"
	"github.com/stratafs/strata/internal/warm/warmtest"
)

// controlEnv serves a control socket for a "mount" of e's source; dir is
// made longer than a unix socket path may be, when long is set.
func controlEnv(t *testing.T, e *warmtest.Env, long bool) (*Mount, *control.Server) {
	t.Helper()
	dir := t.TempDir()
	if long {
		dir = filepath.Join(dir, strings.Repeat("d", 60), strings.Repeat("e", 60))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cfg := config.Defaults()
	cfg.CacheDir = dir
	src, err := config.ParseSource("file://" + e.Src)
	if err != nil {
		t.Fatal(err)
	}
	s := &Mount{cfg: &cfg, src: src, mnt: "/mnt/test", log: slog.New(slog.DiscardHandler),
		be: e.FB, store: e.Store, fetch: e.Fetch, meta: e.Meta}
	c, err := startControl(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return s, c
}

func TestControlSocket(t *testing.T) {
	for _, long := range []bool{false, true} {
		t.Run(map[bool]string{false: "short path", true: "path past the unix socket limit"}[long], func(t *testing.T) {
			e := warmtest.New(t, warmtest.Tree, 1<<30)
			s, c := controlEnv(t, e, long)
			if long && len(filepath.Join(s.cfg.CacheDir, control.SockName)) < 108 {
				t.Fatal("the long path is not long")
			}
			fi, err := os.Stat(filepath.Join(s.cfg.CacheDir, control.SockName))
			if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
				t.Fatalf("socket %v mode %v, want a 0600 socket", err, fi.Mode())
			}

			conn, err := control.Dial(s.cfg.CacheDir)
			if err != nil {
				t.Fatal(err)
			}
			if err := conn.Call(control.Request{Op: "ping"}, nil, nil); err != nil {
				t.Fatalf("ping: %v", err)
			}
			if conn.Hello.Protocol != control.Protocol || conn.Hello.PID != os.Getpid() || conn.Hello.Mountpoint != "/mnt/test" {
				t.Errorf("hello %+v", conn.Hello)
			}
			conn.Close()

			conn, _ = control.Dial(s.cfg.CacheDir)
			err = conn.Call(control.Request{Op: "format"}, nil, nil)
			conn.Close()
			if err == nil || !strings.Contains(err.Error(), "unknown control operation") {
				t.Errorf("unknown op: %v", err)
			}

			// A warm through the socket streams progress and its result.
			conn, _ = control.Dial(s.cfg.CacheDir)
			var progress int
			var res warm.Progress
			err = conn.Call(control.Request{Op: "warm", Source: s.src.String(), Prefix: "train/"}, func(raw json.RawMessage) {
				var p warm.Progress
				if json.Unmarshal(raw, &p) != nil {
					t.Errorf("bad progress %s", raw)
				}
				progress++
			}, &res)
			conn.Close()
			if err != nil || res.Objects != 4 || res.DoneBytes != res.Bytes || progress == 0 {
				t.Fatalf("warm through the socket: %+v, %d progress lines, %v", res, progress, err)
			}

			// A source that is not the mount's is refused, saying why.
			conn, _ = control.Dial(s.cfg.CacheDir)
			err = conn.Call(control.Request{Op: "warm", Source: "file:///elsewhere"}, nil, nil)
			conn.Close()
			if err == nil || !strings.Contains(err.Error(), "not under it") {
				t.Errorf("warm of another source: %v", err)
			}

			c.Close()
			if _, err := os.Stat(filepath.Join(s.cfg.CacheDir, control.SockName)); !os.IsNotExist(err) {
				t.Errorf("socket left behind after close: %v", err)
			}
			if _, err := control.Dial(s.cfg.CacheDir); err == nil {
				t.Error("dial succeeded after close")
			}
		})
	}
}

func TestRelativeSource(t *testing.T) {
	tests := []struct {
		mounted, want string
		rel           string
		ok            bool
	}{
		{"s3://bkt/data", "s3://bkt/data", "", true},
		{"s3://bkt/data", "s3://bkt/data/train", "train/", true},
		{"s3://bkt", "s3://bkt/x/y", "x/y/", true},
		{"s3://bkt/data", "s3://bkt/database", "", false},
		{"s3://bkt/data", "s3://ckt/data", "", false},
		{"s3://bkt/data", "gs://bkt/data", "", false},
		{"file:///srv/d", "file:///srv/d/sub", "sub/", true},
		{"file:///srv/d", "file:///srv/dx", "", false},
		{"file:///", "file:///srv", "srv/", true},
	}
	for _, tc := range tests {
		m, _ := config.ParseSource(tc.mounted)
		w, _ := config.ParseSource(tc.want)
		rel, ok := relativeSource(m, w)
		if rel != tc.rel || ok != tc.ok {
			t.Errorf("relativeSource(%s, %s) = %q, %v; want %q, %v", tc.mounted, tc.want, rel, ok, tc.rel, tc.ok)
		}
	}
}
