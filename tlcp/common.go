package tlcp

import (
	"context"
	"crypto"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/smx509"
)

// VersionTLCP is the only protocol version TLCP knows: 1.1, written 0x0101.
const VersionTLCP uint16 = 0x0101

const (
	recordHeaderLen = 5
	// maxPlaintext is the largest plaintext fragment of one record.
	maxPlaintext = 1 << 14
	// maxCiphertext is the largest record fragment accepted from the wire.
	maxCiphertext = maxPlaintext + 2048
	// maxHandshake bounds one handshake message; certificate chains larger
	// than this are not seen in practice.
	maxHandshake = 65536
)

type recordType uint8

const (
	recordTypeChangeCipherSpec recordType = 20
	recordTypeAlert            recordType = 21
	recordTypeHandshake        recordType = 22
	recordTypeApplicationData  recordType = 23
)

// Handshake message types.
const (
	typeHelloRequest       uint8 = 0
	typeClientHello        uint8 = 1
	typeServerHello        uint8 = 2
	typeCertificate        uint8 = 11
	typeServerKeyExchange  uint8 = 12
	typeCertificateRequest uint8 = 13
	typeServerHelloDone    uint8 = 14
	typeCertificateVerify  uint8 = 15
	typeClientKeyExchange  uint8 = 16
	typeFinished           uint8 = 20
	typeCertificateStatus  uint8 = 22
)

// Hello extensions (GM/T 0024-2023 Appendix A; RFC 6066, RFC 7301).
const (
	extensionServerName    uint16 = 0
	extensionStatusRequest uint16 = 5
	extensionALPN          uint16 = 16
)

// Certificate types in a CertificateRequest.
const (
	certTypeRSASign   = 1
	certTypeECDSASign = 64 // used for SM2 by every TLCP implementation
)

// ClientAuthType says how a server asks for and checks client certificates.
type ClientAuthType int

const (
	// NoClientCert asks for no client certificate, except with the ECDHE
	// suites, which need the client's encryption certificate: those
	// certificates serve the key exchange only and are not the client's
	// PeerCertificates.
	NoClientCert ClientAuthType = iota
	// RequestClientCert asks for a certificate but does not require one.
	RequestClientCert
	// RequireAnyClientCert requires a certificate but does not verify it.
	RequireAnyClientCert
	// VerifyClientCertIfGiven verifies a certificate if one is sent.
	VerifyClientCertIfGiven
	// RequireAndVerifyClientCert requires and verifies a certificate.
	RequireAndVerifyClientCert
)

func (t ClientAuthType) String() string {
	switch t {
	case NoClientCert:
		return "NoClientCert"
	case RequestClientCert:
		return "RequestClientCert"
	case RequireAnyClientCert:
		return "RequireAnyClientCert"
	case VerifyClientCertIfGiven:
		return "VerifyClientCertIfGiven"
	case RequireAndVerifyClientCert:
		return "RequireAndVerifyClientCert"
	}
	return fmt.Sprintf("ClientAuthType(%d)", int(t))
}

func (t ClientAuthType) requiresCert() bool {
	return t == RequireAnyClientCert || t == RequireAndVerifyClientCert
}

func (t ClientAuthType) verifies() bool {
	return t >= VerifyClientCertIfGiven
}

// Certificate is one side's TLCP identity: a signing certificate and an
// encryption certificate, each followed by its chain, with their keys.
//
// SignKey must be a crypto.Signer for an SM2 key. It is called as
// Sign(rand, message, sm2.DefaultSM2SignerOpts) with the whole message
// to sign: the signer computes e = SM3(Z || message) with the default user
// ID itself, as gmsm's *sm2.PrivateKey does.
//
// EncKey must be a crypto.Decrypter for the ECC suites; it is called as
// Decrypt(rand, ciphertext, nil) with a GM/T 0009 DER SM2 ciphertext and
// must return the plaintext. The ECDHE suites need SM2 key agreement with
// the encryption key, which requires a key that implements KeyAgreementKey
// (gmsm's *sm2.PrivateKey does).
//
// A client that authenticates only with a signing certificate leaves
// EncCertificate and EncKey empty; it cannot use the ECDHE suites.
type Certificate struct {
	// SignCertificate is the DER signing certificate followed by its
	// intermediate CA certificates.
	SignCertificate [][]byte
	SignKey         crypto.PrivateKey
	// EncCertificate is the DER encryption certificate followed by its
	// intermediate CA certificates (which are sent only when the signing
	// certificate has none).
	EncCertificate [][]byte
	EncKey         crypto.PrivateKey
	// SignLeaf and EncLeaf are the parsed leaves; filled in on first use
	// when nil.
	SignLeaf *smx509.Certificate
	EncLeaf  *smx509.Certificate
	// OCSPStaple is an OCSP response about the signing certificate,
	// sent to clients that ask for it (status_request) in a
	// CertificateStatus message; none when empty.
	OCSPStaple []byte
}

// hasEnc reports whether the certificate includes an encryption pair.
func (c *Certificate) hasEnc() bool {
	return c != nil && len(c.EncCertificate) > 0 && c.EncKey != nil
}

// wireList appends to dst the certificate list as sent: sign, enc, then
// the chain of the signing certificate (or of the encryption certificate
// when the signing certificate has none).
func (c *Certificate) wireList(dst [][]byte, withEnc bool) [][]byte {
	if len(c.SignCertificate) == 0 {
		return dst
	}
	list := slices.Grow(dst, len(c.SignCertificate)+1)
	list = append(list, c.SignCertificate[0])
	if withEnc && len(c.EncCertificate) > 0 {
		list = append(list, c.EncCertificate[0])
	}
	chain := c.SignCertificate[1:]
	if len(chain) == 0 && withEnc && len(c.EncCertificate) > 1 {
		chain = c.EncCertificate[1:]
	}
	return append(list, chain...)
}

// KeyAgreementKey is implemented by encryption keys that can take part in
// SM2 key agreement (the ECDHE suites). gmsm's *sm2.PrivateKey implements
// it.
type KeyAgreementKey interface {
	ECDH() (*ecdh.PrivateKey, error)
}

// ConnectionState describes an established (or establishing) connection.
type ConnectionState struct {
	Version            uint16
	HandshakeComplete  bool
	DidResume          bool
	CipherSuite        uint16
	NegotiatedProtocol string
	// ServerName is the SNI host name the client sent (server side) or the
	// name the client verified against (client side).
	ServerName string
	// PeerCertificates are the peer's certificates as sent: signing
	// certificate, encryption certificate (when present), then chain. A
	// server under NoClientCert has none, even with the ECDHE suites.
	// They are the peer's identity only when VerifiedChains is not empty.
	PeerCertificates []*smx509.Certificate
	// VerifiedChains are the chains that verified the peer's signing
	// certificate; empty when verification was skipped.
	VerifiedChains [][]*smx509.Certificate
	// SessionID is the session identifier the server assigned (empty when
	// the session cannot be resumed).
	SessionID []byte
	// OCSPResponse is the OCSP response the server stapled (client
	// side, with Config.RequestOCSPStaple), as sent: not verified.
	OCSPResponse []byte
	// TLSFormHello is set on a server whose client sent its ClientHello
	// in TLS form and offered TLCP suites (see ServerForTLSHello).
	TLSFormHello bool
}

// PeerEncCertificate returns the encryption certificate among
// PeerCertificates (nil when the peer sent none): the second certificate,
// when the suite is an ECDHE one or its key usages mark it as one.
func (cs *ConnectionState) PeerEncCertificate() *smx509.Certificate {
	if len(cs.PeerCertificates) < 2 {
		return nil
	}
	suite := cipherSuiteByID(cs.CipherSuite)
	_, enc, _ := clientCertRoles(cs.PeerCertificates, suite != nil && suite.ecdhe)
	return enc
}

// ClientHelloInfo describes a ClientHello for the server callbacks.
type ClientHelloInfo struct {
	CipherSuites    []uint16
	ServerName      string
	SupportedProtos []string
	HasExtensions   bool
	Conn            net.Conn
	ctx             context.Context
}

// Context returns the context of the handshake in progress.
func (c *ClientHelloInfo) Context() context.Context { return c.ctx }

// CertificateRequestInfo describes a CertificateRequest for the client's
// GetClientCertificate callback.
type CertificateRequestInfo struct {
	// AcceptableCAs are DER distinguished names of CAs the server accepts;
	// empty means any.
	AcceptableCAs [][]byte
	// CertificateTypes are the certificate types the server listed.
	CertificateTypes []byte
	// CipherSuite is the suite chosen by the server; ECDHE suites need an
	// encryption certificate.
	CipherSuite uint16
	ctx         context.Context
}

// Context returns the context of the handshake in progress.
func (c *CertificateRequestInfo) Context() context.Context { return c.ctx }

// Config configures a TLCP client or server. A Config may be reused after
// it has been passed to a function of this package; it must not be changed
// then.
type Config struct {
	// Rand is the source of randomness; crypto/rand.Reader when nil.
	Rand io.Reader
	// Time returns the current time; time.Now when nil.
	Time func() time.Time

	// Certificates are the server's identities (the first is the default)
	// or the client's identity for client authentication.
	Certificates []Certificate
	// GetCertificate, when set, chooses the server identity for a
	// ClientHello (for example by SNI); returning nil falls back to
	// Certificates.
	GetCertificate func(*ClientHelloInfo) (*Certificate, error)
	// GetClientCertificate, when set, chooses the client identity when the
	// server asks for one.
	GetClientCertificate func(*CertificateRequestInfo) (*Certificate, error)
	// GetConfigForClient, when set, may return a different Config for this
	// ClientHello (nil keeps this one). An error ends the handshake with
	// the internal_error alert, or with the Alert of an *AlertError (such
	// as AlertUnrecognizedName for a server name it does not serve).
	GetConfigForClient func(*ClientHelloInfo) (*Config, error)

	// VerifyPeerCertificate, when set, is called after normal verification
	// (or instead of it with InsecureSkipVerify) with the raw certificates
	// and the verified chains of the signing certificate.
	VerifyPeerCertificate func(rawCerts [][]byte, verifiedChains [][]*smx509.Certificate) error
	// VerifyConnection, when set, is called at the end of every handshake,
	// resumed or not; an error aborts it.
	VerifyConnection func(ConnectionState) error

	// RootCAs verifies server certificates; the system pool when nil.
	RootCAs *smx509.CertPool
	// ServerName is the host name the client checks the server's signing
	// certificate against; Dial fills it in from the address when empty.
	ServerName string
	// SendServerName makes the client send ServerName as an SNI
	// extension. Off by default: GmSSL 3.1 servers reject any ClientHello
	// that carries extensions.
	SendServerName bool
	// NextProtos are the ALPN protocols, in preference order. A client sends
	// an ALPN extension only when this is set.
	NextProtos []string
	// RequestOCSPStaple makes a client ask the server for an OCSP
	// response about its certificate (status_request); the answer, if
	// any, is ConnectionState.OCSPResponse, unverified: the caller
	// checks it. Off by default: some TLCP servers refuse hellos with
	// extensions they do not know.
	RequestOCSPStaple bool
	// InsecureSkipVerify makes the client accept any server certificate.
	// For tests and diagnostics only.
	InsecureSkipVerify bool

	// ClientAuth is the server's client-certificate policy.
	ClientAuth ClientAuthType
	// ClientCAs verifies client certificates; the system pool when nil.
	ClientCAs *smx509.CertPool
	// AcceptServerAuthClientCerts makes the server accept client
	// certificates whose extended key usage allows serverAuth but not
	// clientAuth, which some GM CAs issue. By default a client certificate
	// must allow clientAuth (or carry no extended key usage, or
	// anyExtendedKeyUsage), as crypto/tls requires.
	AcceptServerAuthClientCerts bool

	// CipherSuites lists the enabled suites in preference order; the
	// server uses its own order. Nil means DefaultCipherSuites.
	CipherSuites []uint16

	// SessionCache stores server sessions for session-ID resumption. When
	// nil, a per-Config LRU cache (DefaultSessionCacheSize sessions,
	// DefaultSessionLifetime) is used unless SessionsDisabled is set;
	// Clone shares it.
	//
	// Each session is bound to what it was made under: SessionContext,
	// ClientAuth, AcceptServerAuthClientCerts, the subjects of ClientCAs
	// and the server's signing and encryption certificates. A handshake
	// where any of them differs does not resume it, so configurations
	// (clones, reloads, certificate rotations) may share a cache without
	// a laxer one letting clients past a stricter one. On resumption the
	// client's certificates are checked again against the current policy,
	// clock and ClientCAs.
	SessionCache SessionCache
	// SessionContext names what sessions belong to, such as a listener or
	// a site; sessions resume only under the same name (as OpenSSL's
	// session ID context).
	SessionContext string
	// SessionsDisabled turns off session resumption (server and client).
	SessionsDisabled bool
	// ClientSessionCache stores client sessions by server; no resumption
	// is attempted when nil.
	ClientSessionCache ClientSessionCache

	// ClientECDHEParamsAsVector makes the client send its ECDHE
	// ClientKeyExchange with a two-byte length prefix (71 bytes, as GmSSL
	// expects) instead of the 69-byte form most peers use. Servers accept
	// both.
	ClientECDHEParamsAsVector bool
	// ClientSignCertOnly makes the client send only its signing
	// certificate (and chain) with the ECC suites, for GmSSL servers that
	// reject an encryption certificate there. By default a client that has
	// both sends both, as Tongsuo servers require.
	ClientSignCertOnly bool
	// ClientRawCertificateVerify makes the client sign its
	// CertificateVerify over the handshake messages themselves instead of
	// their SM3 hash, as GmSSL 3 servers expect. Tongsuo and gotlcp
	// servers reject that form; servers of this package accept both.
	ClientRawCertificateVerify bool

	defaultSessionCacheOnce sync.Once
	defaultSessionCache     SessionCache
	// bindingMemo is the last session binding computed for this Config.
	bindingMemo atomic.Pointer[bindingMemo]
}

// Clone returns a shallow copy of c (callbacks, pools and caches shared).
func (c *Config) Clone() *Config {
	if c == nil {
		return nil
	}
	return &Config{
		Rand:                        c.Rand,
		Time:                        c.Time,
		Certificates:                c.Certificates,
		GetCertificate:              c.GetCertificate,
		GetClientCertificate:        c.GetClientCertificate,
		GetConfigForClient:          c.GetConfigForClient,
		VerifyPeerCertificate:       c.VerifyPeerCertificate,
		VerifyConnection:            c.VerifyConnection,
		RootCAs:                     c.RootCAs,
		ServerName:                  c.ServerName,
		SendServerName:              c.SendServerName,
		NextProtos:                  c.NextProtos,
		RequestOCSPStaple:           c.RequestOCSPStaple,
		InsecureSkipVerify:          c.InsecureSkipVerify,
		ClientAuth:                  c.ClientAuth,
		ClientCAs:                   c.ClientCAs,
		AcceptServerAuthClientCerts: c.AcceptServerAuthClientCerts,
		CipherSuites:                c.CipherSuites,
		SessionCache:                c.clonedSessionCache(),
		SessionContext:              c.SessionContext,
		SessionsDisabled:            c.SessionsDisabled,
		ClientSessionCache:          c.ClientSessionCache,
		ClientECDHEParamsAsVector:   c.ClientECDHEParamsAsVector,
		ClientSignCertOnly:          c.ClientSignCertOnly,
		ClientRawCertificateVerify:  c.ClientRawCertificateVerify,
	}
}

// clonedSessionCache is the SessionCache of a clone: the one set, or the
// default one, shared (none when sessions are disabled and none is set).
func (c *Config) clonedSessionCache() SessionCache {
	if c.SessionCache != nil {
		return c.SessionCache
	}
	return c.serverSessionCache()
}

func (c *Config) rand() io.Reader {
	if c.Rand != nil {
		return c.Rand
	}
	return rand.Reader
}

func (c *Config) now() time.Time {
	if c.Time != nil {
		return c.Time()
	}
	return time.Now()
}

func (c *Config) cipherSuites() []uint16 {
	if c.CipherSuites != nil {
		return c.CipherSuites
	}
	return DefaultCipherSuites
}

// serverSessionCache returns the cache to use on the server, creating the
// default one on first use; nil when resumption is off.
func (c *Config) serverSessionCache() SessionCache {
	if c.SessionsDisabled {
		return nil
	}
	if c.SessionCache != nil {
		return c.SessionCache
	}
	c.defaultSessionCacheOnce.Do(func() {
		c.defaultSessionCache = NewLRUSessionCache(DefaultSessionCacheSize, DefaultSessionLifetime)
	})
	return c.defaultSessionCache
}

// mutualProtocol picks the first of the server's protocols the client
// offered.
func mutualProtocol(server, client []string) (string, bool) {
	for _, s := range server {
		for _, c := range client {
			if s == c {
				return s, true
			}
		}
	}
	return "", false
}

var errNoCertificates = errors.New("tlcp: no certificates configured")
