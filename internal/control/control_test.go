package control

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// echo answers "echo" with its prefix after two progress messages and
// "fail" with an error.
func echo(ctx context.Context, req Request, progress func(any)) (any, error) {
	switch req.Op {
	case "echo":
		progress(map[string]int{"n": 1})
		progress(map[string]int{"n": 2})
		return map[string]string{"prefix": req.Prefix}, nil
	case "fail":
		return nil, errors.New("it failed")
	}
	return nil, UnknownOp(req.Op)
}

func TestProtocol(t *testing.T) {
	for _, long := range []bool{false, true} {
		t.Run(map[bool]string{false: "short path", true: "path past the unix socket limit"}[long], func(t *testing.T) {
			dir := t.TempDir()
			if long {
				dir = filepath.Join(dir, strings.Repeat("d", 60), strings.Repeat("e", 60))
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if len(filepath.Join(dir, SockName)) < 108 {
					t.Fatal("the long path is not long")
				}
			}
			srv, err := Listen(dir, Hello{Source: "file:///src", Mountpoint: "/mnt/test"}, echo, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.Close)
			fi, err := os.Stat(filepath.Join(dir, SockName))
			if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
				t.Fatalf("socket %v mode %v, want a 0600 socket", err, fi.Mode())
			}

			conn, err := Dial(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := conn.Call(Request{Op: "ping"}, nil, nil); err != nil {
				t.Fatalf("ping: %v", err)
			}
			if h := conn.Hello; h.Protocol != Protocol || h.PID != os.Getpid() || h.Mountpoint != "/mnt/test" || h.Source != "file:///src" {
				t.Errorf("hello %+v", h)
			}
			conn.Close()

			conn, _ = Dial(dir)
			var got map[string]string
			var seen []int
			err = conn.Call(Request{Op: "echo", Prefix: "train/"}, func(raw json.RawMessage) {
				var p map[string]int
				if json.Unmarshal(raw, &p) != nil {
					t.Errorf("bad progress %s", raw)
				}
				seen = append(seen, p["n"])
			}, &got)
			conn.Close()
			if err != nil || got["prefix"] != "train/" || len(seen) != 2 || seen[0] != 1 || seen[1] != 2 {
				t.Fatalf("echo: %v, progress %v, %v", got, seen, err)
			}

			for op, want := range map[string]string{"fail": "it failed", "format": "unknown control operation"} {
				conn, _ = Dial(dir)
				err = conn.Call(Request{Op: op}, nil, nil)
				conn.Close()
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%s: %v, want %q", op, err, want)
				}
			}

			srv.Close()
			if _, err := os.Stat(filepath.Join(dir, SockName)); !os.IsNotExist(err) {
				t.Errorf("socket left behind after close: %v", err)
			}
			if _, err := Dial(dir); !errors.Is(err, ErrNoControl) {
				t.Errorf("dial after close: %v, want ErrNoControl", err)
			}
		})
	}
}
