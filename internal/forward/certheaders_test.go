package forward

import (
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/emmansun/gmsm/smx509"
)

func TestByteSequencesLimit(t *testing.T) {
	a, b := []byte("first certificate"), []byte("second")
	both := ":Zmlyc3QgY2VydGlmaWNhdGU=:, :c2Vjb25k:"
	for _, tc := range []struct {
		max  int
		want string
	}{
		{1000, both},
		{len(both), both},
		{len(both) - 1, ":Zmlyc3QgY2VydGlmaWNhdGU=:"},
		{len(":Zmlyc3QgY2VydGlmaWNhdGU=:"), ":Zmlyc3QgY2VydGlmaWNhdGU=:"},
		{len(":Zmlyc3QgY2VydGlmaWNhdGU=:") - 1, ""},
	} {
		if got := byteSequences([][]byte{a, b}, tc.max); got != tc.want {
			t.Errorf("max %d: %q, want %q", tc.max, got, tc.want)
		}
	}
}

func TestSANList(t *testing.T) {
	u, _ := url.Parse("spiffe://example.cn/a")
	c := &smx509.Certificate{
		DNSNames:       []string{"api.example.cn", "bad\nname"},
		IPAddresses:    []net.IP{net.ParseIP("10.0.0.5")},
		EmailAddresses: []string{`odd"name\@example.cn`},
		URIs:           []*url.URL{u},
	}
	want := `"DNS:api.example.cn", "IP:10.0.0.5", "email:odd\"name\\@example.cn", "URI:spiffe://example.cn/a"`
	if got := sanList(c); got != want {
		t.Errorf("sanList = %s\nwant      %s", got, want)
	}
	if strings.Contains(sanList(c), "\n") {
		t.Error("a control character reached the header")
	}
}
