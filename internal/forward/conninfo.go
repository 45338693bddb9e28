package forward

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/internal/h1client"
	"github.com/gmgate/gmgate/internal/observe"
	"github.com/gmgate/gmgate/internal/upstream"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// connInfo describes an established client connection: what the
// handshake negotiated. It travels in each request's context, since
// http.Request.TLS knows only crypto/tls.
type ConnInfo struct {
	Listener string
	Client   net.Addr // after the PROXY header, when one was used
	Protocol string   // tlcp, tls1.2, tls1.3, tls1.3-sm
	Suite    string
	SNI      string
	// site is the name of the site the handshake was made for.
	Site string
	// Group is the key exchange group of a TLS 1.3 handshake
	// (curveSM2, curveSM2MLKEM768, X25519MLKEM768, ...); "" otherwise.
	Group string
	// alpn is the application protocol the handshake chose ("" for none).
	ALPN      string
	Resumed   bool
	Handshake time.Duration
	// peerCert is the client's signing certificate, set only when its
	// chain was verified: an unverified certificate says nothing about
	// who the client is.
	peerCert    *smx509.Certificate
	peerCertDER []byte
	// peerChain is the DER of the rest of the verified chain, from the
	// signing certificate's issuer to the trust anchor; peerEncDER is a
	// TLCP client's (verified) encryption certificate. Both are set only
	// with peerCert.
	peerChain  [][]byte
	peerEncDER []byte
	// ambiguousFraming is set when a request header block with both
	// Content-Length and Transfer-Encoding was read on the connection;
	// the next request answered takes it and closes the connection.
	AmbiguousFraming atomic.Bool
	// clientVerified is set when the client's certificate was verified.
	clientVerified bool
	// Watch, set on HTTP/1 connections, ends the upstream exchange of
	// a request forwarded on the handler's goroutine when the connection
	// goes away (a new one each time the HTTP server takes the
	// connection: edge.HTTPConn.Context).
	Watch *h1client.Watch
	// GMCapableHello is set when the ClientHello was a TLS hello that
	// offered TLCP suites, to what it got: tlcp, tls or refused.
	GMCapableHello string

	clientOnce sync.Once
	clientText string
	// headers are the forwarding and session header values of its
	// requests (headers.go).
	headers atomic.Pointer[connHeaders]
}

// setTLCPClient records the client's identity from a TLCP handshake.
func (ci *ConnInfo) SetTLCPClient(cs tlcp.ConnectionState) {
	if len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return
	}
	ci.clientVerified = true
	ci.peerCert = cs.PeerCertificates[0]
	ci.peerCertDER = cs.PeerCertificates[0].Raw
	for _, c := range cs.VerifiedChains[0][1:] {
		ci.peerChain = append(ci.peerChain, c.Raw)
	}
	if enc := cs.PeerEncCertificate(); enc != nil {
		ci.peerEncDER = enc.Raw
	}
}

// setTLSClient records the client's identity from a TLS handshake.
func (ci *ConnInfo) SetTLSClient(cs tls.ConnectionState) {
	if len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return
	}
	cert, err := smx509.ParseCertificate(cs.PeerCertificates[0].Raw)
	if err != nil {
		return
	}
	ci.clientVerified = true
	ci.peerCert = cert
	ci.peerCertDER = cert.Raw
	for _, c := range cs.VerifiedChains[0][1:] {
		ci.peerChain = append(ci.peerChain, c.Raw)
	}
}

// SetTLS13Client records the client's identity from a TLS 1.3 ShangMi
// handshake.
func (ci *ConnInfo) SetTLS13Client(cs tls13.ConnectionState) {
	if len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return
	}
	ci.clientVerified = true
	ci.peerCert = cs.PeerCertificates[0]
	ci.peerCertDER = cs.PeerCertificates[0].Raw
}

type ConnInfoKey = upstream.ClientKey

func InfoFrom(ctx context.Context) *ConnInfo {
	ci, _ := ctx.Value(ConnInfoKey{}).(*ConnInfo)
	if ci == nil {
		return &ConnInfo{Protocol: "unknown"}
	}
	return ci
}

// Fields are the fields that describe the connection.
func (ci *ConnInfo) Fields(w observe.FieldWriter) {
	w.Str("listener", ci.Listener)
	w.Str("site", ci.Site)
	w.Str("client", ci.clientString())
	w.Str("sni", ci.SNI)
	w.Str("protocol", ci.Protocol)
	w.Str("suite", ci.Suite)
	w.Str("group", ci.Group)
	w.Bool("resumed", ci.Resumed)
	w.Float("handshake_ms", observe.Millis(ci.Handshake))
	if ci.GMCapableHello != "" {
		w.Str("gm_capable_tls_hello", ci.GMCapableHello)
	}
}

// clientString is the client's address as text, made once per
// connection.
func (ci *ConnInfo) clientString() string {
	ci.clientOnce.Do(func() { ci.clientText = AddrString(ci.Client) })
	return ci.clientText
}

func AddrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}
