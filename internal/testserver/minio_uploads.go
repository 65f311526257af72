package testserver

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"time"
)

// MultipartUploads lists the keys of bucket's incomplete multipart
// uploads (ListMultipartUploads, one page), as a user checking for
// uploads a writer left open would.
func (m *MinIO) MultipartUploads(bucket string) ([]string, error) {
	req, err := http.NewRequest(http.MethodGet, m.Endpoint+"/"+bucket+"?uploads=", nil)
	if err != nil {
		return nil, err
	}
	signV4(req, m.AccessKey, m.SecretKey, m.Region, time.Now())
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("list multipart uploads of %s: %w", bucket, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("list multipart uploads of %s: %w", bucket, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("list multipart uploads of %s: %s: %s", bucket, resp.Status, bytes.TrimSpace(body))
	}
	var out struct {
		Uploads []struct {
			Key string `xml:"Key"`
		} `xml:"Upload"`
	}
	if err := xml.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("list multipart uploads of %s: %w", bucket, err)
	}
	keys := make([]string, 0, len(out.Uploads))
	for _, u := range out.Uploads {
		keys = append(keys, u.Key)
	}
	return keys, nil
}
