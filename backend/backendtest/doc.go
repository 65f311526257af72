// Package backendtest is the conformance suite every backend.Backend passes:
// backend/local always, backend/s3 against a real MinIO, and any future
// source. A backend's own test file calls Run with a Harness that makes a
// fresh, empty backend per subtest and says which optional behaviours the
// source supports (Caps):
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, backendtest.Harness{
//			New:  func(t *testing.T) backend.Backend { return newEmptyBackend(t) },
//			Caps: backendtest.Caps{LongKeys: true},
//		})
//	}
//
// The suite covers Stat, List (order, paging, recursion, odd keys), ReadRange
// (ranges, pinned versions, short bodies, concurrency) and Writer, Copier
// and Deleter; a backend declared ReadOnly is checked to lack all three or
// refuse them with ErrNotSupported instead. Nothing is skipped: optional behaviours a
// backend does not declare are simply not run. Errors are matched with
// errors.Is against the backend package's sentinels only.
//
// The page checks (CheckPage, CheckPageOrder) are exported so that other
// tests, and fakes, can hold listings to the same rules.
//
// The package holds no state and no locks.
package backendtest
