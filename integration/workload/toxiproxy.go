package workload

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"
)

// Toxiproxy is a toxiproxy-server child process; each proxy it creates
// forwards a local port to an upstream with optional injected latency.
type Toxiproxy struct {
	API  string // http://127.0.0.1:<port>
	proc *Proc
}

// StartToxiproxy starts bin/toxiproxy-server (installed by `make
// bench-tools`) with its log in dir.
func StartToxiproxy(ctx context.Context, dir string) (*Toxiproxy, error) {
	bin, err := Tool("toxiproxy-server")
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	t := &Toxiproxy{API: "http://127.0.0.1:" + strconv.Itoa(port)}
	t.proc, err = StartProc("toxiproxy", filepath.Join(dir, "toxiproxy.log"), nil, bin,
		"-host", "127.0.0.1", "-port", strconv.Itoa(port))
	if err != nil {
		return nil, err
	}
	if err := awaitHTTP(ctx, t.proc, "toxiproxy", t.API+"/version", 20*time.Second); err != nil {
		return nil, err
	}
	return t, nil
}

// Proxy creates a proxy named name from a free local port to upstream
// ("127.0.0.1:9000") that delays every response by latency (a downstream
// latency toxic: each request waits latency for its answer on a reused
// connection, as a round trip to a distant bucket does). It returns the
// proxy's "127.0.0.1:<port>".
func (t *Toxiproxy) Proxy(ctx context.Context, name, upstream string, latency time.Duration) (string, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := FreePort()
		if err != nil {
			return "", err
		}
		listen := "127.0.0.1:" + strconv.Itoa(port)
		lastErr = t.post(ctx, "/proxies", map[string]any{
			"name": name, "listen": listen, "upstream": upstream, "enabled": true,
		})
		if lastErr != nil {
			continue
		}
		if latency > 0 {
			err := t.post(ctx, "/proxies/"+name+"/toxics", map[string]any{
				"name": "latency", "type": "latency", "stream": "downstream", "toxicity": 1.0,
				"attributes": map[string]int64{"latency": latency.Milliseconds(), "jitter": 0},
			})
			if err != nil {
				return "", err
			}
		}
		return listen, nil
	}
	return "", lastErr
}

func (t *Toxiproxy) post(ctx context.Context, path string, body any) error {
	if err := postJSON(ctx, t.API+path, body, func(status int) bool { return status/100 == 2 }); err != nil {
		return fmt.Errorf("workload: toxiproxy %s: %w", path, err)
	}
	return nil
}

// Stop stops the server.
func (t *Toxiproxy) Stop() error { return t.proc.Stop(5 * time.Second) }
