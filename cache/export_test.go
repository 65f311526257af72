package cache

// CloseAsCrash closes s without recording a clean shutdown: the next open
// sees what a crash leaves (tests flip bytes on disk "during" it).
func CloseAsCrash(s *Store) {
	s.verifiedAll.Store(false)
	_ = s.Close() // nothing to report: a crash
}

// NoBackgroundVerify turns the background verifier off for t, so that the
// read path meets the bad blocks first.
func NoBackgroundVerify(t interface{ Cleanup(func()) }) {
	backgroundVerify = false
	t.Cleanup(func() { backgroundVerify = true })
}
