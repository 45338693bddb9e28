//go:build !race

package tlcp

const raceEnabled = false
