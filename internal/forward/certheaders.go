package forward

import (
	"encoding/base64"
	"strings"

	"github.com/emmansun/gmsm/smx509"
)

// byteSequences is an RFC 8941 list of byte sequences (":base64:"), the
// form of RFC 9440's Client-Cert (one item) and Client-Cert-Chain: as
// many of ders, from the first, as fit in max bytes; "" when not even
// the first fits, so that the header is left out rather than cut inside
// a certificate.
func byteSequences(ders [][]byte, max int) string {
	var b strings.Builder
	for _, der := range ders {
		sep := 0
		if b.Len() > 0 {
			sep = len(", ")
		}
		if b.Len()+sep+2+base64.StdEncoding.EncodedLen(len(der)) > max {
			break
		}
		if sep > 0 {
			b.WriteString(", ")
		}
		b.WriteByte(':')
		b.WriteString(base64.StdEncoding.EncodeToString(der))
		b.WriteByte(':')
	}
	return b.String()
}

// sanList is an RFC 8941 list of strings naming the subject alternative
// names of c, each with its kind as OpenSSL prints it: "DNS:api.example.cn",
// "IP:10.0.0.5", "email:ops@example.cn", "URI:spiffe://example.cn/a". A
// name that a structured-field string cannot carry (a byte outside
// printable ASCII) is left out: it could not be told apart from another.
func sanList(c *smx509.Certificate) string {
	var b strings.Builder
	add := func(kind, v string) {
		for i := 0; i < len(v); i++ {
			if v[i] < 0x20 || v[i] > 0x7e {
				return
			}
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('"')
		b.WriteString(kind)
		b.WriteByte(':')
		for i := 0; i < len(v); i++ {
			if v[i] == '"' || v[i] == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(v[i])
		}
		b.WriteByte('"')
	}
	for _, n := range c.DNSNames {
		add("DNS", n)
	}
	for _, ip := range c.IPAddresses {
		add("IP", ip.String())
	}
	for _, e := range c.EmailAddresses {
		add("email", e)
	}
	for _, u := range c.URIs {
		add("URI", u.String())
	}
	return b.String()
}
