package route

import (
	"crypto/x509"
	"testing"
)

func TestCertificateNames(t *testing.T) {
	leaf := &x509.Certificate{DNSNames: []string{"www.example.cn", "*.Static.Example.CN", "api.example.cn."}}
	for pattern, want := range map[string]bool{
		"www.example.cn":        true,
		"api.example.cn":        true,  // a trailing dot in the certificate does not count
		"img.static.example.cn": true,  // one label under the wildcard
		"a.b.static.example.cn": false, // the wildcard names one label only
		"static.example.cn":     false,
		"*.static.example.cn":   true,  // the same wildcard
		"*.example.cn":          false, // a wider wildcard than the certificate's
		"*.www.example.cn":      false, // a wildcard host needs a wildcard name
		"pay.example.cn":        false,
	} {
		if got := certificateNames(leaf, pattern); got != want {
			t.Errorf("certificateNames(%q) = %v, want %v", pattern, got, want)
		}
	}
	cnOnly := &x509.Certificate{}
	cnOnly.Subject.CommonName = "www.example.cn"
	if certificateNames(cnOnly, "www.example.cn") {
		t.Error("a name in the subject CN alone counts")
	}
	if got := describeNames(cnOnly); got != "no DNS name; its subject CN www.example.cn is not read by clients that follow RFC 6125" {
		t.Errorf("describeNames of a CN-only certificate: %q", got)
	}
}
