package csi

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestHandoffRoundTrip passes a descriptor and options through a socket
// whose path is longer than sun_path allows, then the control messages.
func TestHandoffRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if len(filepath.Join(dir, SocketName)) < 108 {
		t.Fatalf("test path %d bytes: not long enough to need the workaround", len(dir))
	}
	l, err := ListenHandoff(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if st, err := os.Stat(filepath.Join(dir, SocketName)); err != nil || st.Mode().Perm() != 0o666 {
		t.Fatalf("socket: %v %v", st, err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sent := Handoff{VolumeID: "vol-1", VolumeName: "data", Source: "s3://b/p", Args: []string{"--read-only=true"},
		Env: map[string]string{"AWS_SECRET_ACCESS_KEY": "s3cr3t"}, Files: map[string][]byte{GCSKeyFile: []byte("{}")}}
	serverDone := make(chan error, 1)
	go func() {
		c, err := l.AcceptUnix()
		if err != nil {
			serverDone <- err
			return
		}
		defer c.Close()
		err = SendHandoff(c, sent, w)
		w.Close()
		if err != nil {
			serverDone <- err
			return
		}
		m, err := RecvControl(c)
		if err == nil && m.Op != OpReady {
			err = errors.New("want ready, got " + m.Op)
		}
		if err == nil {
			err = SendControl(c, Control{Op: OpExit})
		}
		serverDone <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := DialHandoff(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, f, err := RecvHandoff(c)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != HandoffVersion || got.Source != sent.Source || got.Env["AWS_SECRET_ACCESS_KEY"] != "s3cr3t" ||
		string(got.Files[GCSKeyFile]) != "{}" || got.VolumeName != "data" {
		t.Fatalf("received %+v", got)
	}
	// The descriptor is the pipe's write end: bytes written to it come
	// out of the read end.
	if _, err := f.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	buf := make([]byte, 4)
	if _, err := r.Read(buf); err != nil || string(buf) != "ping" {
		t.Fatalf("read %q, %v", buf, err)
	}
	if err := SendControl(c, Control{Op: OpReady}); err != nil {
		t.Fatal(err)
	}
	if m, err := RecvControl(c); err != nil || m.Op != OpExit {
		t.Fatalf("control = %+v, %v", m, err)
	}
	if err := <-serverDone; err != nil {
		t.Fatal(err)
	}
}

func TestHandoffLogValueHidesSecrets(t *testing.T) {
	h := Handoff{VolumeID: "v", Env: map[string]string{"AWS_SECRET_ACCESS_KEY": "s3cr3t"}}
	if s := h.LogValue().String(); strings.Contains(s, "s3cr3t") || !strings.Contains(s, "secret_keys=1") {
		t.Fatalf("log value %q", s)
	}
}

func TestRecvHandoffRejects(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		fds     bool
		want    string
	}{
		{name: "no descriptor", payload: `{"version":1}`, want: "want one descriptor"},
		{name: "old version", payload: `{"version":0}`, fds: true, want: "version 0"},
		{name: "garbage", payload: `not json`, fds: true, want: "hand-off protocol"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(pair[0])
			var oob []byte
			if tc.fds {
				oob = unix.UnixRights(int(os.Stdin.Fd()))
			}
			if err := unix.Sendmsg(pair[0], []byte(tc.payload), oob, nil, 0); err != nil {
				t.Fatal(err)
			}
			f := os.NewFile(uintptr(pair[1]), "peer")
			c, err := netUnixConn(f)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, _, err := RecvHandoff(c); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func netUnixConn(f *os.File) (*net.UnixConn, error) {
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	return c.(*net.UnixConn), nil
}
