package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/cache/writeback"
	"github.com/stratafs/strata/fs"
)

func uploadsCmd() *cobra.Command {
	var asJSON, retry, discard bool
	cmd := &cobra.Command{
		Use:   "uploads [--retry|--discard] MOUNTPOINT [PATH]",
		Short: "List, retry or discard a mount's pending and failed uploads",
		Long: `List every upload of MOUNTPOINT not yet complete (pending, held while the
file is open, uploading, retrying, failed) and every write kept aside without
upload (a failed write, a killed writer), with its last error.

--retry MOUNTPOINT [PATH] retries now (all uploads without PATH); a held
upload (its file still open for writing) goes at its last close, never half
written; a PATH whose upload is done has nothing to retry, which is not an
error.
--discard MOUNTPOINT PATH gives up PATH's upload: nothing reaches the bucket,
the file reads as the bucket's version again, and the written bytes are kept
under the cache dir's failed-writes directory (the command prints where).
An upload whose request is under way is stopped; if it had already replaced
the object in the bucket, the bucket keeps it, the file reads as it, and the
command says so and exits 1. A PATH with no upload but a failed take-down
(the object a deleted or renamed file's upload left, which the bucket refused
to delete) has the take-down given up: the bucket keeps the object.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			mnt := args[0]
			rel := ""
			if len(args) == 2 {
				var err error
				if rel, err = mountRel(mnt, args[1]); err != nil {
					return err
				}
			}
			switch {
			case retry && discard:
				return errors.New("--retry and --discard exclude each other")
			case retry:
				return uploadsRequest(mnt, fs.XattrRetry, rel)
			case discard:
				if rel == "" {
					return errors.New("--discard needs the PATH of the file whose upload to give up")
				}
				before, _ := listUploads(mnt)
				err := uploadsRequest(mnt, fs.XattrDiscard, rel)
				if err != nil && !errors.Is(err, writeback.ErrLandedFirst) {
					return err
				}
				for _, u := range before {
					switch {
					case u.Key != rel:
					case u.TakeDown:
						fmt.Printf("discarded: %s: no longer taken down; the bucket keeps the object a deleted or renamed file's upload left\n", u.Key)
					default:
						fmt.Printf("discarded: %s; its bytes are kept in %s\n", u.Key, keptPath(u))
					}
				}
				return err // too late: the bucket holds what landed
			}
			us, err := listUploads(mnt)
			if err != nil {
				return err
			}
			if rel != "" {
				var mine []writeback.Upload
				for _, u := range us {
					if u.Key == rel {
						mine = append(mine, u)
					}
				}
				us = mine
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(us)
			}
			printUploads(os.Stdout, us)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&retry, "retry", false, "retry now (PATH, or every upload)")
	cmd.Flags().BoolVar(&discard, "discard", false, "give up PATH's upload; its bytes are kept under the cache dir's failed-writes")
	return cmd
}

// uploadsExample is the uploads command for the uploads of rel under mnt.
func uploadsExample(mnt, rel string) string { return "strata uploads " + mnt + " " + rel }

// keptPath is where a discarded upload's bytes end up.
func keptPath(u writeback.Upload) string {
	if u.State == writeback.StateNotUpload {
		return u.Copy
	}
	return filepath.Join(filepath.Dir(filepath.Dir(u.Copy)), "failed-writes", filepath.Base(u.Copy))
}

// mountRel is p as a path relative to the mount (p absolute, or relative
// to the current directory or to the mountpoint).
func mountRel(mnt, p string) (string, error) {
	root, err := filepath.Abs(mnt)
	if err != nil {
		return "", err
	}
	abs := p
	if !filepath.IsAbs(p) {
		if _, err := os.Lstat(filepath.Join(root, p)); err == nil || !strings.HasPrefix(p, ".") {
			abs = filepath.Join(root, p)
		} else if abs, err = filepath.Abs(p); err != nil {
			return "", err
		}
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return "", fmt.Errorf("%s is not a file under %s", p, mnt)
	}
	return filepath.ToSlash(rel), nil
}

// listUploads reads the mount's uploads listing.
func listUploads(mnt string) ([]writeback.Upload, error) {
	buf := make([]byte, 1<<20)
	for {
		n, err := unix.Getxattr(mnt, fs.XattrUploads, buf)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ERANGE) && len(buf) < 256<<20:
			buf = make([]byte, 4*len(buf))
			continue
		case errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.ENOENT):
			if why := notALiveMount(mnt, uploadsExample); why != nil {
				return nil, why
			}
			return nil, fmt.Errorf("%s is not a strata mount (or one too old to list its uploads)", mnt)
		case err != nil:
			return nil, fmt.Errorf("uploads %s: %w", mnt, err)
		}
		var us []writeback.Upload
		if err := json.Unmarshal(buf[:n], &us); err != nil {
			return nil, fmt.Errorf("uploads %s: unexpected answer: %w", mnt, err)
		}
		return us, nil
	}
}

// uploadsRequest sends a retry or discard request for rel.
func uploadsRequest(mnt, attr, rel string) error {
	// The request is an attribute written to mnt: on any other directory
	// it would be stored there, and look done.
	if why := notALiveMount(mnt, uploadsExample); why != nil {
		return why
	}
	var err error
	for {
		if err = unix.Setxattr(mnt, attr, []byte(rel), 0); !errors.Is(err, unix.EINTR) {
			break
		}
	}
	what := rel
	if what == "" {
		what = "every upload"
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ENOENT) && notALiveMount(mnt, uploadsExample) != nil:
		// The mountpoint itself is missing, or no mount.
		return notALiveMount(mnt, uploadsExample)
	case errors.Is(err, unix.ENOENT) && attr == fs.XattrRetry && rel != "":
		// An upload that has just landed (its own retry got there first)
		// leaves nothing to retry: the caller's aim is met. A path that
		// names nothing in the mount is a mistake.
		if _, serr := os.Lstat(filepath.Join(mnt, filepath.FromSlash(rel))); serr != nil {
			return fmt.Errorf("%s: no upload pending or failed, and %w", what, serr)
		}
		fmt.Printf("%s: no upload pending or failed: nothing to retry\n", what)
		return nil
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%s: no upload pending or failed", what)
	case errors.Is(err, unix.EINVAL) && attr == fs.XattrRetry:
		return fmt.Errorf("%s: %w", what, writeback.ErrNotRetryable)
	case errors.Is(err, unix.EBUSY) && attr == fs.XattrDiscard:
		return fmt.Errorf("%s: %w", what, writeback.ErrStillTakingDown)
	case errors.Is(err, unix.EALREADY) && attr == fs.XattrDiscard:
		return fmt.Errorf("%s: discarded too late: %w; the bucket holds it, and the file reads as it", what, writeback.ErrLandedFirst)
	case errors.Is(err, unix.EPERM):
		return fmt.Errorf("%s: only the mount's user or root may do that", what)
	case errors.Is(err, unix.ENOTSUP):
		if why := notALiveMount(mnt, uploadsExample); why != nil {
			return why
		}
		return fmt.Errorf("%s is not a strata mount (or one too old for this)", mnt)
	}
	return fmt.Errorf("%s %s: %w", strings.TrimPrefix(attr, "user.strata."), what, err)
}

// printUploads prints the listing as a table.
func printUploads(w *os.File, us []writeback.Upload) {
	if len(us) == 0 {
		fmt.Fprintln(w, "no uploads pending or failed")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tSTATE\tSIZE\tATTEMPTS\tAGE\tERROR")
	for _, u := range us {
		state := u.State
		if u.TakeDown && u.State == writeback.StateFailed {
			state = "take-down failed"
		}
		if !u.NextRetry.IsZero() {
			state += " in " + time.Until(u.NextRetry).Round(time.Second).String()
		}
		age := ""
		if !u.Committed.IsZero() {
			age = time.Since(u.Committed).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", u.Key, state, u.Size, u.Attempts, age, strings.ReplaceAll(u.Error, "\n", " "))
	}
	tw.Flush()
}
