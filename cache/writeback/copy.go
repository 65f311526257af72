package writeback

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// copyFile copies n bytes from src to dst: a reflink when the filesystem
// shares extents (xfs, btrfs), else copy_file_range (in-kernel), else a
// plain copy.
func copyFile(dst, src *os.File, n int64) error {
	if err := unix.IoctlFileClone(int(dst.Fd()), int(src.Fd())); err == nil {
		return nil
	}
	var off int64
	for off < n {
		srcOff, dstOff := off, off
		c, err := unix.CopyFileRange(int(src.Fd()), &srcOff, int(dst.Fd()), &dstOff, int(n-off), 0)
		if err != nil || c == 0 {
			break
		}
		off += int64(c)
	}
	if off < n {
		if _, err := io.Copy(io.NewOffsetWriter(dst, off), io.NewSectionReader(src, off, n-off)); err != nil {
			return err
		}
	}
	return dst.Truncate(n)
}
