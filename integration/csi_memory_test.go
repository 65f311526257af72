package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/strata/internal/config"
	"github.com/stratafs/strata/internal/testserver"
)

// memoryCgroup makes a child memory cgroup of this process's own with the
// given limit and returns its cgroup.procs file (v2 memory.max, else v1
// memory.limit_in_bytes), as a container runtime would for a container.
func memoryCgroup(t *testing.T, limit int64) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("strata-csi-test-%d", os.Getpid())
	var tried []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var dir, limitFile string
		switch {
		case parts[0] == "0" && parts[1] == "":
			dir, limitFile = filepath.Join("/sys/fs/cgroup", parts[2], name), "memory.max"
		case strings.Contains(","+parts[1]+",", ",memory,"):
			dir, limitFile = filepath.Join("/sys/fs/cgroup/memory", parts[2], name), "memory.limit_in_bytes"
		default:
			continue
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			tried = append(tried, err.Error())
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, limitFile), []byte(fmt.Sprint(limit)), 0o644); err != nil {
			os.Remove(dir)
			tried = append(tried, err.Error())
			continue
		}
		t.Cleanup(func() {
			for i := 0; i < 50 && os.Remove(dir) != nil; i++ {
				time.Sleep(100 * time.Millisecond)
			}
		})
		return filepath.Join(dir, "cgroup.procs")
	}
	msg := "cannot create a memory cgroup to run the sidecar in: " + strings.Join(tried, "; ")
	if testserver.Required() {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// logFields returns the fields of the first JSON log line with msg.
func logFields(path, msg string) map[string]any {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == msg {
			return m
		}
	}
	return nil
}

// TestCSISidecarBoundedMemoryAndBusyUnmount: a sidecar in a container
// with a 768 MiB limit holds the Go heap under 90% of it and sizes its
// buffers to a quarter; and a volume unpublished while a file is open
// (lazy unmount, the FUSE connection stays up) still ends the sidecar,
// through the plugin's exit message.
func TestCSISidecarBoundedMemoryAndBusyUnmount(t *testing.T) {
	requireFUSE(t)
	const limit = 768 << 20
	procs := memoryCgroup(t, limit)
	vol := newCSIVolume(t, "sidecar")
	p := startCSI(t)
	target, handoff := podTarget(t, t.TempDir(), "7b2e", "data")
	if err := p.publish(publishReq("vol-mem", target, vol.attrs, vol.secrets)); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "sidecar.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	// Join the cgroup, then become the sidecar (as a container's process would).
	cmd := exec.Command("/bin/sh", "-c", `echo $$ > "$0" && exec "$@"`, procs,
		testserver.Binary(t, "strata"), "sidecar", "--handoff-dir", handoff, "--cache-dir", t.TempDir(), "--log-format", "json")
	cmd.Env = append(noCredentials(), "GOMEMLIMIT=")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	defer func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill() // it may exit meanwhile: <-exited waits either way
			<-exited
		}
	}()
	why := func() string { b, _ := os.ReadFile(logPath); return csiTail(b, 8000) }
	csiWaitFile(t, filepath.Join(handoff, "data", "ready"), 60*time.Second, why)

	plan := logFields(logPath, "sidecar: memory bounded by the container limit")
	mounted := logFields(logPath, "mounted")
	wantGo, wantBuf := config.Size(limit/10*9).String(), config.Size(limit/4).String()
	if plan == nil || plan["limit"] != config.Size(limit).String() || plan["gomemlimit"] != wantGo || plan["buffers"] != wantBuf {
		t.Fatalf("memory plan %v, want limit %s gomemlimit %s buffers %s\n%s", plan, config.Size(limit), wantGo, wantBuf, why())
	}
	if mounted == nil || mounted["memory_limit"] != wantBuf {
		t.Fatalf("mount memory_limit %v, want %s", mounted["memory_limit"], wantBuf)
	}

	f, err := os.Open(filepath.Join(target, "shard-0000.tar"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Read(make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	if err := p.unpublish("vol-mem", target); err != nil {
		t.Fatalf("NodeUnpublishVolume with a file open: %v", err)
	}
	if fs, _ := csiMountAt(target); fs != "" {
		t.Fatalf("target still mounted (%s)", fs)
	}
	select {
	case <-exited:
		if exitErr != nil {
			t.Fatalf("sidecar exited with %v, want 0\n%s", exitErr, why())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("sidecar still running 30s after unpublish with a file open\n%s", why())
	}
	if logFields(logPath, "sidecar: the plugin unpublished the volume") == nil {
		t.Fatalf("the sidecar did not get the exit message\n%s", why())
	}
}
