//go:build race

package tlcp

// raceEnabled: the race detector makes sync.Pool drop some of what is put
// back, so allocation counts mean nothing under it.
const raceEnabled = true
