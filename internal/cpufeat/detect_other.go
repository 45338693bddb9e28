//go:build !amd64 && !arm64 && !loong64

package cpufeat

func detect() Set { return 0 }
