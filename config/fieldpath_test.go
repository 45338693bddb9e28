package config

import "testing"

// A problem of the file makes a certificate or address problem moot only
// when both are about the same field or section.
func TestRelatedPaths(t *testing.T) {
	for _, c := range []struct {
		file, loaded string
		moot         bool
	}{
		{"listeners[0].tlcp.sign_cert", "listeners[0].tlcp.sign_cert", true},
		{"listeners[0].tlcp", "listeners[0].tlcp.sign_key", true},
		{"listeners[0].tlcp.enc_key", "listeners[0].tlcp", true},
		{"listeners[0].tls.key", "listeners[0].tls", true},
		{"listeners[0].tlcp.suites[1]", "listeners[0].tlcp", false},
		{"listeners[0].tlcp.suites[1]", "listeners[0].tlcp.sign_cert", false},
		{"listeners[1].listen", "listeners[10].listen", false},
		{"listeners[1]", "listeners[10].listen", false},
		{"listeners[1]", "listeners[1].listen", true},
		{"admin.listen", "listeners[0].listen", false},
		{"", "listeners[0].listen", true},
	} {
		if got := RelatedPaths(c.file, c.loaded); got != c.moot {
			t.Errorf("RelatedPaths(%q, %q) = %v, want %v", c.file, c.loaded, got, c.moot)
		}
	}
}
