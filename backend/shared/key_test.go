package shared

import (
	"strings"
	"testing"
)

func TestIdentityDistinguishesEveryPart(t *testing.T) {
	base := Identity("s3://b", "k", "v1")
	for _, c := range []struct {
		name                 string
		source, key, version string
	}{
		{"other source", "s3://c", "k", "v1"},
		{"other key", "s3://b", "k2", "v1"},
		{"other version", "s3://b", "k", "v2"},
		{"boundary moved key/version", "s3://b", "kv", "1"},
		{"boundary moved source/key", "s3://", "bk", "v1"},
		{"empty version", "s3://b", "k", ""},
	} {
		if Identity(c.source, c.key, c.version) == base {
			t.Errorf("%s: same identity as the base", c.name)
		}
	}
	if Identity("s3://b", "k", "v1") != base {
		t.Error("identity is not deterministic")
	}
}

func TestObjectNames(t *testing.T) {
	id := Identity("s3://b@127.0.0.1:9000", "data/x.bin", "etag1")
	l := NewLayout(1<<20, 1<<20)
	k := NewKeys("cache/", "s3://b@127.0.0.1:9000", l)
	name := k.Object(id, 7)
	// The format is an interface with other nodes (and versions of
	// Strata): changing it must be deliberate (a new Namespace).
	const golden = "cache/strata1/9b8bc4fc97d79e6f/41b72ad8cb906f6e77e369fa09d9c60b/b1048576-g1/0000000007"
	if name != golden {
		t.Fatalf("name %q, want %q", name, golden)
	}
	others := map[string]string{
		"group":      k.Object(id, 8),
		"version":    k.Object(Identity("s3://b@127.0.0.1:9000", "data/x.bin", "etag2"), 7),
		"block":      NewKeys("cache/", "s3://b@127.0.0.1:9000", NewLayout(1<<19, 1<<20)).Object(id, 7),
		"group size": NewKeys("cache/", "s3://b@127.0.0.1:9000", NewLayout(1<<20, 4<<20)).Object(id, 7),
		"source":     NewKeys("cache/", "s3://b", l).Object(id, 7),
		"prefix":     NewKeys("", "s3://b@127.0.0.1:9000", l).Object(id, 7),
	}
	for what, other := range others {
		if other == name {
			t.Errorf("changing the %s keeps the name %s", what, name)
		}
	}
	idp, pl, g, ok := ParseObject(name)
	if !ok || pl != l || g != 7 || !strings.Contains(name, idp) {
		t.Errorf("ParseObject(%q) = %q %+v %d %v", name, idp, pl, g, ok)
	}
	for _, bad := range []string{"", "a/b/c", "cache/strata1/x/y/b1-g1/00", "p/strata1/s/" + strings.Repeat("a", 32) + "/b0-g1/1",
		"p/strata1/s/" + strings.Repeat("a", 32) + "/bx-g1/1", MarkerKey("p/")} {
		if _, _, _, ok := ParseObject(bad); ok {
			t.Errorf("ParseObject(%q) accepted", bad)
		}
	}
}

func TestLayout(t *testing.T) {
	for _, c := range []struct {
		block, group, wantG int64
	}{
		{1 << 20, 1 << 20, 1},
		{1 << 20, 512 << 10, 1}, // never less than a block
		{64 << 10, 1 << 20, 16},
		{128 << 10, 1<<20 + 1, 8},
		{4 << 20, 8 << 20, 2},
	} {
		if l := NewLayout(c.block, c.group); l.GroupBlocks != c.wantG {
			t.Errorf("NewLayout(%d, %d) = %d blocks per group, want %d", c.block, c.group, l.GroupBlocks, c.wantG)
		}
	}
	l := Layout{BlockSize: 100, GroupBlocks: 4}
	for _, c := range []struct {
		from, to, last, off, n int64
	}{
		{0, 0, 100, 0, 164},
		{4, 7, 100, 0, 4 * 164},
		{5, 6, 30, 164, 164 + 64 + 30},
		{11, 11, 1, 3 * 164, 65},
	} {
		off, n := l.Span(c.from, c.to, c.last)
		if off != c.off || n != c.n {
			t.Errorf("Span(%d, %d, %d) = %d, %d; want %d, %d", c.from, c.to, c.last, off, n, c.off, c.n)
		}
	}
	if l.Group(7) != 1 || l.FirstBlock(3) != 12 {
		t.Error("Group/FirstBlock")
	}
}
