package mount

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stratafs/strata/internal/cachetools"
	"github.com/stratafs/strata/internal/config"
	"github.com/stratafs/strata/internal/control"
	"github.com/stratafs/strata/internal/warm"
	"github.com/stratafs/strata/internal/warm/warmtest"
)

// controlEnv serves a control socket for a "mount" of e's source.
func controlEnv(t *testing.T, e *warmtest.Env) *Mount {
	t.Helper()
	cfg := config.Defaults()
	cfg.CacheDir = t.TempDir()
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
	return s
}

// call sends one request to s's control socket.
func call(t *testing.T, s *Mount, req control.Request, onProgress func(json.RawMessage), result any) error {
	t.Helper()
	conn, err := control.Dial(s.cfg.CacheDir)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.Call(req, onProgress, result)
}

// TestControlHandler: what the mount answers on its control socket (the
// protocol itself is internal/control's test).
func TestControlHandler(t *testing.T) {
	e := warmtest.New(t, warmtest.Tree, 1<<30)
	s := controlEnv(t, e)

	var hello control.Hello
	conn, err := control.Dial(s.cfg.CacheDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Call(control.Request{Op: "ping"}, nil, nil); err != nil {
		t.Fatalf("ping: %v", err)
	}
	hello = conn.Hello
	conn.Close()
	if hello.Mountpoint != "/mnt/test" || hello.Source != s.src.String() {
		t.Errorf("hello %+v names another mount", hello)
	}

	if err := call(t, s, control.Request{Op: "format"}, nil, nil); err == nil || !strings.Contains(err.Error(), "unknown control operation") {
		t.Errorf("unknown op: %v", err)
	}

	// A warm through the socket streams progress and its result.
	var progress int
	var res warm.Progress
	err = call(t, s, control.Request{Op: "warm", Source: s.src.String(), Prefix: "train/"}, func(raw json.RawMessage) {
		var p warm.Progress
		if json.Unmarshal(raw, &p) != nil {
			t.Errorf("bad progress %s", raw)
		}
		progress++
	}, &res)
	if err != nil || res.Objects != 4 || res.DoneBytes != res.Bytes || progress == 0 {
		t.Fatalf("warm through the socket: %+v, %d progress lines, %v", res, progress, err)
	}

	// A source that is not the mount's is refused, saying why.
	err = call(t, s, control.Request{Op: "warm", Source: "file:///elsewhere"}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "not under it") {
		t.Errorf("warm of another source: %v", err)
	}

	// Stats are the mount's live counts.
	var st cachetools.Stats
	if err := call(t, s, control.Request{Op: "stats"}, nil, &st); err != nil || !st.Live || st.Objects != 4 || st.CacheDir != s.cfg.CacheDir {
		t.Errorf("stats through the socket: %+v, %v", st, err)
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
