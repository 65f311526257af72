package mount

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/stratafs/strata/backend"
)

// emptyPrefixWarning says, for a source whose prefix holds no key, that
// the mount will be an empty directory: s3://bucket/typo-prefix mounted
// without a word. It still mounts (an empty prefix is where checkpoints
// start). A file of the prefix's name (s3://bucket/model.pt) is named.
// "" when the prefix holds keys, when there is no prefix, or when the
// listing fails (the mount then says nothing it cannot know).
func emptyPrefixWarning(ctx context.Context, be backend.Backend, src string, prefix string) string {
	if prefix == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	page, err := be.List(ctx, prefix, backend.ListOptions{Limit: 1})
	if err != nil || len(page.Objects) > 0 || len(page.Prefixes) > 0 {
		return ""
	}
	name := strings.TrimSuffix(prefix, "/")
	if _, err := be.Stat(ctx, name); err == nil {
		return fmt.Sprintf("%s holds no objects, but %s is an object (a file, not a directory): the mount is an empty directory; to read it, mount its parent", src, name)
	}
	return fmt.Sprintf("%s holds no objects: mounted an empty directory (files written there go under this prefix); if you expected data, check the prefix", src)
}
