package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// sqliteCommits builds a database through the mount the way an
// application does, one connection, several transactions, counting the
// rows after each commit on the same connection, and prints the sha256 of
// the file. SQLite commits by writing pages and fdatasync, then reads the
// header back through the same descriptor: a mount that answers that read
// with the file as it was before the commit makes the connection see the
// rows it just wrote vanish (and its next transaction would write pages
// computed from them).
const sqliteCommits = `
import hashlib, os, sqlite3, sys
path = sys.argv[1]
c = sqlite3.connect(path)
c.execute("create table t (i integer primary key, v text)")
c.commit()
for batch in range(5):
    with c:
        c.executemany("insert into t (v) values (?)", [("row %d-%d " % (batch, j) * 8,) for j in range(200)])
    n = c.execute("select count(*) from t").fetchone()[0]
    if n != 200 * (batch + 1):
        sys.exit("after commit %d the connection counts %d rows, want %d" % (batch, n, 200 * (batch + 1)))
check = c.execute("pragma integrity_check").fetchone()[0]
if check != "ok":
    sys.exit("integrity_check: " + check)
c.close()
# Reopened: a write in place of a file that exists (no O_TRUNC).
c = sqlite3.connect(path)
for batch in range(3):
    with c:
        c.executemany("insert into t (v) values (?)", [("more %d-%d " % (batch, j) * 8,) for j in range(100)])
    n = c.execute("select count(*) from t").fetchone()[0]
    if n != 1000 + 100 * (batch + 1):
        sys.exit("reopened, after commit %d the connection counts %d rows, want %d" % (batch, n, 1000 + 100 * (batch + 1)))
c.close()
# Write-ahead logging: the last connection's close checkpoints the log
# (an ftruncate of the database) and removes the -wal and -shm files, as
# on local disk, unless the database's inode number changed under it
# (SQLite then takes the file for moved and leaves them).
c = sqlite3.connect(path)
c.execute("pragma journal_mode=wal")
with c:
    c.execute("insert into t (v) values ('logged')")
c.close()
for leftover in (path + "-wal", path + "-shm"):
    if os.path.exists(leftover):
        sys.exit("%s left after the last connection closed" % os.path.basename(leftover))
ino = os.stat(path).st_ino
if ino == 0:
    sys.exit("the database's inode number is 0")
with open(path, "rb") as f:
    print(hashlib.sha256(f.read()).hexdigest())
`

// TestSQLiteThroughTheMount: a SQLite database written through the mount
// (both upload modes; created, then reopened and written in place) reads back every committed row on the connection
// that wrote it, passes its integrity check, and the bucket ends with the
// file SQLite wrote (README, Writing: a descriptor reads what was written
// through it, also after fsync); in write-ahead-log mode the last close
// removes the -wal and -shm files, which needs the database's inode number
// to stay what it was at open (it was 0 after an ftruncate).
func TestSQLiteThroughTheMount(t *testing.T) {
	requireFUSE(t)
	script := filepath.Join(t.TempDir(), "commits.py")
	if err := os.WriteFile(script, []byte(sqliteCommits), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) {
			m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", mode)
			name := "app-" + mode + ".db"
			out, err := exec.Command("/usr/bin/python3", script, filepath.Join(m.dir, name)).CombinedOutput()
			if err != nil {
				t.Fatalf("sqlite through the mount: %v\n%s", err, out)
			}
			fields := strings.Fields(string(out))
			if len(fields) == 0 {
				t.Fatalf("no digest printed:\n%s", out)
			}
			runSync(t, m)
			got, n, err := bucketSHA(t, w, name)
			if err != nil || got != fields[len(fields)-1] {
				t.Fatalf("bucket object (%d bytes) differs from the file SQLite wrote: %v", n, err)
			}
		})
	}
}
