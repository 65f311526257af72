package s3

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCheckNamesAnEndpointThatIsNotS3: an endpoint that answers, but not
// as S3 (a web server, the MinIO console's port, a proxy's error page),
// gets an error that says so and names the endpoint, not only the SDK's
// "deserializing xml" or "301 MovedPermanently".
func TestCheckNamesAnEndpointThatIsNotS3(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	for _, tc := range []struct {
		name   string
		status int
	}{{"redirect", http.StatusMovedPermanently}, {"html-404", http.StatusNotFound}, {"html-200", http.StatusOK}, {"html-400", http.StatusBadRequest}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				if tc.status == http.StatusMovedPermanently {
					w.Header().Set("Location", "/login")
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte("<!doctype html><html><body>console</body></html>"))
			}))
			defer srv.Close()
			b, err := New(context.Background(), "bucket", Options{Endpoint: srv.URL, Region: "us-east-1", ForcePathStyle: true})
			if err != nil {
				t.Fatal(err)
			}
			err = b.Check(context.Background())
			if err == nil || !strings.Contains(err.Error(), "not answer as S3") || !strings.Contains(err.Error(), srv.URL) {
				t.Fatalf("Check against a web page (%d): %v; want an error saying the endpoint %s does not answer as S3", tc.status, err, srv.URL)
			}
		})
	}
}
