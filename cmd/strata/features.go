package main

// Extension points for the feature groups of internal/config: each group
// binds its flags and hooks into start and close from its own file
// (write.go, shared.go, ops.go), so features grow without editing the
// mount assembly in serve.go.
