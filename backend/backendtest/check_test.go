package backendtest

import (
	"strings"
	"testing"

	"github.com/stratafs/strata/backend"
)

func objs(keys ...string) []backend.ObjectInfo {
	o := make([]backend.ObjectInfo, len(keys))
	for i, k := range keys {
		o[i] = backend.ObjectInfo{Key: k, Version: "v"}
	}
	return o
}

func TestCheckPage(t *testing.T) {
	cases := []struct {
		name   string
		prefix string
		opt    backend.ListOptions
		page   backend.ListPage
		bad    string // substring of the expected error; "" = valid
	}{
		{"valid", "p/", backend.ListOptions{}, backend.ListPage{Objects: objs("p/", "p/a", "p/b"), Prefixes: []string{"p/c/", "p/d/"}}, ""},
		{"unsorted objects", "", backend.ListOptions{}, backend.ListPage{Objects: objs("b", "a")}, "strictly increasing"},
		{"duplicate objects", "", backend.ListOptions{}, backend.ListPage{Objects: objs("a", "a")}, "strictly increasing"},
		{"unsorted prefixes", "", backend.ListOptions{}, backend.ListPage{Prefixes: []string{"b/", "a/"}}, "strictly increasing"},
		{"outside prefix", "p/", backend.ListOptions{}, backend.ListPage{Objects: objs("q")}, "outside prefix"},
		{"too deep", "p/", backend.ListOptions{}, backend.ListPage{Objects: objs("p/a/b")}, "more than one level"},
		{"deep ok when recursive", "p/", backend.ListOptions{Recursive: true}, backend.ListPage{Objects: objs("p/a/b")}, ""},
		{"prefixes when recursive", "", backend.ListOptions{Recursive: true}, backend.ListPage{Prefixes: []string{"a/"}}, "recursive listing returned prefixes"},
		{"prefix without slash", "", backend.ListOptions{}, backend.ListPage{Prefixes: []string{"a"}}, "one level below"},
		{"prefix two levels", "", backend.ListOptions{}, backend.ListPage{Prefixes: []string{"a/b/"}}, "one level below"},
		{"over limit", "", backend.ListOptions{Limit: 2}, backend.ListPage{Objects: objs("a", "b"), Prefixes: []string{"c/"}}, "above Limit"},
		{"empty version", "", backend.ListOptions{}, backend.ListPage{Objects: []backend.ObjectInfo{{Key: "a"}}}, "empty Version"},
	}
	for _, c := range cases {
		err := CheckPage(c.prefix, c.opt, c.page)
		switch {
		case c.bad == "" && err != nil:
			t.Errorf("%s: unexpected error %v", c.name, err)
		case c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad)):
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.bad)
		}
	}
}

func TestCheckPageOrder(t *testing.T) {
	p1 := backend.ListPage{Objects: objs("a", "d-e"), Prefixes: []string{"d/"}}
	ok := backend.ListPage{Objects: objs("d0")}
	if err := CheckPageOrder(p1, ok); err != nil {
		t.Errorf("valid order rejected: %v", err)
	}
	// "d.x" sorts before the previous page's last entry "d/".
	bad := backend.ListPage{Objects: objs("d.x", "z")}
	if err := CheckPageOrder(p1, bad); err == nil {
		t.Error("overlapping pages accepted")
	}
	if err := CheckPageOrder(backend.ListPage{}, bad); err != nil {
		t.Errorf("empty previous page: %v", err)
	}
}

func TestExpectLevel(t *testing.T) {
	objs, prefixes := expectLevel(treeKeys, "")
	if got := strings.Join(objs, ","); got != "a,d-e,d.x,d0,z,é0" {
		t.Errorf("objects %s", got)
	}
	if got := strings.Join(prefixes, ","); got != "b/,c d/,d/,é/" {
		t.Errorf("prefixes %s", got)
	}
}

func TestLongKey(t *testing.T) {
	for _, n := range []int{1000, 1001, 1002, 999, 404, 405} {
		k := longKey("long/", n, 200)
		if len(k) != n {
			t.Errorf("longKey(%d) has %d bytes", n, len(k))
		}
		for _, seg := range strings.Split(k, "/") {
			if seg == "" || len(seg) > 200 {
				t.Errorf("longKey(%d) has segment of %d bytes", n, len(seg))
			}
		}
	}
}

func TestPayloadDeterministic(t *testing.T) {
	a, b, c := payload(100, 1), payload(100, 1), payload(100, 2)
	if string(a) != string(b) || string(a) == string(c) {
		t.Fatal("payload must depend on the seed only")
	}
}
