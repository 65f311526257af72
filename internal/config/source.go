package config

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
)

// Source is a parsed SOURCE argument.
type Source struct {
	Scheme string // "s3", "gs" or "file"
	Bucket string // s3, gs
	Prefix string // key prefix shown as the mount root: "" or ending in "/"
	Path   string // file: absolute directory
}

// String renders the source as the user would write it.
func (s Source) String() string {
	if s.Scheme == "file" {
		// Escaped, so that every path (spaces, %, ?, #, control bytes)
		// parses back to itself.
		return (&url.URL{Scheme: "file", Path: s.Path}).String()
	}
	return s.Scheme + "://" + s.Bucket + "/" + s.Prefix
}

// bucketName accepts what S3 and GCS accept (lowercase letters, digits,
// dots, hyphens and, for GCS and older S3 buckets, underscores), 3 to 222
// characters (GCS allows long dotted names).
var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$`)

// ParseSource parses s3://bucket[/prefix], gs://bucket[/prefix] or
// file:///absolute/path.
func ParseSource(s string) (Source, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return Source{}, fmt.Errorf("source %q: want s3://bucket[/prefix], gs://bucket[/prefix] or file:///path", s)
	}
	switch scheme {
	case "s3", "gs":
		bucket, prefix, _ := strings.Cut(rest, "/")
		if bucket == "" {
			return Source{}, fmt.Errorf("source %q: no bucket name", s)
		}
		if !bucketName.MatchString(bucket) {
			return Source{}, fmt.Errorf("source %q: %q is not a valid bucket name (3-222 of a-z 0-9 . - _)", s, bucket)
		}
		p, err := cleanPrefix(prefix)
		if err != nil {
			return Source{}, fmt.Errorf("source %q: %w", s, err)
		}
		return Source{Scheme: scheme, Bucket: bucket, Prefix: p}, nil
	case "file":
		u, err := url.Parse(s)
		if err != nil {
			return Source{}, fmt.Errorf("source %q: %w", s, err)
		}
		if u.Host != "" && u.Host != "localhost" {
			return Source{}, fmt.Errorf("source %q: file:// takes an absolute path (file:///data), not a host", s)
		}
		if !strings.HasPrefix(u.Path, "/") {
			return Source{}, fmt.Errorf("source %q: file:// needs an absolute path", s)
		}
		if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
			// Not silently cut off: a URL ends its path at ? and #.
			return Source{}, fmt.Errorf("source %q: a ? or # ends a URL's path; write them as %%3F and %%23", s)
		}
		if strings.ContainsRune(u.Path, 0) { // %00: no directory has such a name
			return Source{}, fmt.Errorf("source %q: the path contains a NUL byte", s)
		}
		return Source{Scheme: "file", Path: path.Clean(u.Path)}, nil
	case "":
		return Source{}, fmt.Errorf("source %q: missing scheme (s3://, gs:// or file://)", s)
	}
	return Source{}, fmt.Errorf("source %q: unknown scheme %q: want s3://, gs:// or file://", s, scheme)
}

// cleanPrefix normalises a key prefix to "" or "a/b/"; it rejects
// segments that could not be directories on the mount.
func cleanPrefix(p string) (string, error) {
	p = strings.Trim(p, "/")
	if p == "" {
		return "", nil
	}
	for _, seg := range strings.Split(p, "/") {
		switch {
		case seg == "":
			return "", fmt.Errorf("prefix %q has an empty segment (//)", p)
		case seg == "." || seg == "..":
			return "", fmt.Errorf("prefix %q has a %q segment", p, seg)
		case len(seg) > 255:
			return "", fmt.Errorf("prefix %q has a segment longer than 255 bytes", p)
		case strings.ContainsRune(seg, 0):
			return "", fmt.Errorf("prefix %q contains a NUL byte", p)
		}
	}
	return p + "/", nil
}
