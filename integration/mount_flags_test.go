package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratafs/strata/internal/testserver"
)

// TestFlagMatrix: no flag value or combination makes strata mount panic.
// Every flag of `strata mount --help` gets values that are wrong for it
// (empty, garbage, negative, out of range); backend flags get conflicting
// and missing files and profiles. A failure is one clear line and exit
// status 1; a value that happens to be valid may mount (it is unmounted).
// A bad --profile used to SIGSEGV on a typed-nil backend's Close.
func TestFlagMatrix(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t).(*minioServer)
	bucket := srv.newBucket(t)
	bin := testserver.Binary(t, "strata")
	good := srv.source(bucket, "")
	garbageKey := filepath.Join(t.TempDir(), "key.json")
	if err := os.WriteFile(garbageKey, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}

	type tc struct {
		name, source string
		args         []string
		mustFail     string // a word the error must hold; "" if it may succeed
	}
	var cases []tc
	help, err := exec.Command(bin, "mount", "--help").Output()
	if err != nil {
		t.Fatal(err)
	}
	flagRe := regexp.MustCompile(`^\s+(?:-\w, )?--([a-z0-9-]+)(?: (\w+))?`)
	skip := map[string]bool{"help": true, "foreground": true, "print-config": true}
	sc := bufio.NewScanner(bytes.NewReader(help))
	for sc.Scan() {
		m := flagRe.FindStringSubmatch(sc.Text())
		if m == nil || skip[m[1]] {
			continue
		}
		name := m[1]
		if m[2] == "" { // a boolean
			cases = append(cases, tc{name: name + "=maybe", source: good, args: []string{"--" + name + "=maybe"}, mustFail: "invalid argument"})
			continue
		}
		for _, v := range []string{"", "garbage", "-1", "99999999999999999999999"} {
			cases = append(cases, tc{name: name + "=" + v, source: good, args: []string{"--" + name + "=" + v}})
		}
	}
	if len(cases) < 60 {
		t.Fatalf("found only %d flag cases in --help:\n%s", len(cases), help)
	}
	gs := "gs://" + bucket
	cases = append(cases,
		tc{name: "missing profile", source: good, args: []string{"--profile", "no-such-profile"}, mustFail: "no-such-profile"},
		tc{name: "profile and no-sign-request", source: good, args: []string{"--profile", "no-such-profile", "--no-sign-request"}},
		tc{name: "key-file on s3", source: good, args: []string{"--key-file", garbageKey}},
		tc{name: "missing key-file", source: gs, args: []string{"--key-file", "/nonexistent/key.json"}, mustFail: "key"},
		tc{name: "garbage key-file", source: gs, args: []string{"--key-file", garbageKey}, mustFail: "key"},
		tc{name: "key-file and anonymous", source: gs, args: []string{"--key-file", garbageKey, "--anonymous"}},
		tc{name: "profile on gs", source: gs, args: []string{"--profile", "no-such-profile"}},
		tc{name: "file source missing", source: "file:///nonexistent/dir", mustFail: "nonexistent"},
		tc{name: "file source is a file", source: "file://" + garbageKey, mustFail: "directory"},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mnt, cacheDir := t.TempDir(), t.TempDir()
			args := append([]string{"mount", c.source, mnt, "--cache-dir", cacheDir}, srv.flags()...)
			args = append(args, c.args...)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Env = append(os.Environ(), srv.env()...)
			cmd.Env = append(cmd.Env, "AWS_CONFIG_FILE=/nonexistent", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent")
			cmd.Dir = t.TempDir() // a relative --log-file or --cache-dir lands here
			cmd.Env = append(cmd.Env, "XDG_CACHE_HOME="+t.TempDir())
			out, err := cmd.CombinedOutput()
			msg := strings.TrimSpace(string(out)) + "\n" + logTail(cacheDir)
			if strings.Contains(msg, "panic") || strings.Contains(msg, "goroutine ") || strings.Contains(msg, "SIGSEGV") {
				t.Fatalf("strata %q crashed:\n%s", args, msg)
			}
			if err == nil {
				unmountAndWait(t, mnt, cacheDir)
				if c.mustFail != "" {
					t.Fatalf("mount succeeded, want an error about %q", c.mustFail)
				}
				return
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("exit %v, want status 1; output %q", err, out)
			}
			line := strings.TrimSpace(string(out))
			if !strings.HasPrefix(line, "strata: ") || strings.Contains(line, "\n") {
				t.Errorf("error is not one line naming strata: %q", line)
			}
			if c.mustFail != "" && !strings.Contains(strings.ToLower(line), strings.ToLower(c.mustFail)) {
				t.Errorf("error %q does not mention %q", line, c.mustFail)
			}
			if isMounted(mnt) {
				unmountAndWait(t, mnt, cacheDir)
				t.Errorf("%s is mounted after a failed mount", mnt)
			}
		})
	}
}

// unmountAndWait unmounts a mount started outside startMount and waits
// for its process (found by the mountpoint in its command line, as its
// cache dir may be anywhere) to exit.
func unmountAndWait(t *testing.T, mnt, _ string) {
	t.Helper()
	pids := servingPIDs(mnt)
	if err := exec.Command("umount", mnt).Run(); err != nil {
		if out, err := exec.Command("umount", "-l", mnt).CombinedOutput(); err != nil {
			t.Logf("umount -l %s: %v %s", mnt, err, out)
		}
	}
	for _, pid := range pids {
		for i := 0; i < 1500 && syscall.Kill(pid, 0) == nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("strata (pid %d) still running 30s after umount", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL) // the test has failed already
		}
	}
}

// servingPIDs returns the processes whose command line names mnt.
func servingPIDs(mnt string) []int {
	var out []int
	ds, _ := os.ReadDir("/proc")
	for _, d := range ds {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		for _, a := range bytes.Split(b, []byte{0}) {
			if string(a) == mnt {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}
