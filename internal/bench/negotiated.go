package bench

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"slices"
	"strconv"
	"strings"

	"github.com/gmgate/gmgate/tlcp"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// negotiated describes what a handshake agreed on, in the words of the
// report's rows: the TLCP suite, or the TLS version, key exchange group
// and the key of the server's certificate ("TLS1.3 X25519 RSA-2048").
func negotiated(c handshaker) string {
	switch c := c.(type) {
	case *tlcp.Conn:
		return tlcp.CipherSuiteName(c.ConnectionState().CipherSuite)
	case *tls13.Conn:
		st := c.ConnectionState()
		return "TLS1.3-SM " + st.Group.String()
	case *tls.Conn:
		st := c.ConnectionState()
		var leaf *x509.Certificate
		if len(st.PeerCertificates) > 0 {
			leaf = st.PeerCertificates[0]
		}
		return tlsLabel(st.Version, st.CurveID, leaf)
	}
	return ""
}

func tlsLabel(version uint16, group tls.CurveID, leaf *x509.Certificate) string {
	parts := make([]string, 0, 3)
	parts = append(parts, tlsVersionName(version))
	if group != 0 {
		parts = append(parts, groupName(group))
	}
	if leaf != nil {
		parts = append(parts, certKeyName(leaf.PublicKey))
	}
	return strings.Join(parts, " ")
}

func tlsVersionName(v uint16) string {
	switch v {
	case tls.VersionTLS13:
		return "TLS1.3"
	case tls.VersionTLS12:
		return "TLS1.2"
	case tls.VersionTLS11:
		return "TLS1.1"
	case tls.VersionTLS10:
		return "TLS1.0"
	}
	return "TLS 0x" + strconv.FormatUint(uint64(v), 16)
}

func groupName(g tls.CurveID) string {
	switch g {
	case tls.CurveP256:
		return "P-256"
	case tls.CurveP384:
		return "P-384"
	case tls.CurveP521:
		return "P-521"
	}
	return g.String()
}

// certKeyName names the server certificate's key, which decides the
// signature the server makes: "ECDSA-P256", "RSA-2048", "Ed25519".
func certKeyName(pub any) string {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		return "ECDSA-" + strings.ReplaceAll(k.Curve.Params().Name, "-", "")
	case *rsa.PublicKey:
		return "RSA-" + strconv.Itoa(k.N.BitLen())
	case ed25519.PublicKey:
		return "Ed25519"
	}
	return "unknown-key"
}

// mostCommon returns the label with the highest count (the first by name
// on a tie), and whether there were others.
func mostCommon(counts map[string]int64) (string, bool) {
	labels := make([]string, 0, len(counts))
	for l := range counts {
		labels = append(labels, l)
	}
	slices.Sort(labels)
	best := ""
	for _, l := range labels {
		if best == "" || counts[l] > counts[best] {
			best = l
		}
	}
	return best, len(labels) > 1
}
