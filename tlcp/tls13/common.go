package tls13

import (
	"context"
	"crypto"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/tlcp"
)

// VersionTLS13 is the only version this package speaks.
const VersionTLS13 uint16 = 0x0304

// legacyVersion is the record and hello version TLS 1.3 writes (RFC 8446
// §4.1.2, §5.1).
const legacyVersion uint16 = 0x0303

const (
	recordHeaderLen = 5
	// maxPlaintext is the largest plaintext of one record (2^14). This
	// package neither sends nor accepts record_size_limit (RFC 8449): the
	// ShangMi peers it serves do not use it.
	maxPlaintext = 1 << 14
	// maxCiphertext is the largest protected record: 2^14 + 256 (RFC 8446
	// §5.2).
	maxCiphertext = maxPlaintext + 256
	// maxHandshake bounds one handshake message.
	maxHandshake = 65536
	// maxKeyUpdates bounds the KeyUpdate messages a peer may send without
	// application data between them; more is an abuse of the connection
	// (each costs a key derivation).
	maxKeyUpdates = 32
	// maxEmptyRecords bounds consecutive records that carry nothing
	// (empty application data, compatibility change_cipher_spec).
	maxEmptyRecords = 64
	// maxTickets bounds the NewSessionTicket messages a client takes
	// from one connection.
	maxTickets = 8
	// keyUpdateAfter is the number of records after which Write updates
	// its keys by itself, well below the SM4-GCM usage limit of about
	// 2^24.5 full records (the AES-GCM bound of RFC 8446 §5.5 applies to
	// any 128-bit block cipher).
	keyUpdateAfter = 1 << 24
)

type recordType uint8

const (
	recordTypeChangeCipherSpec recordType = 20
	recordTypeAlert            recordType = 21
	recordTypeHandshake        recordType = 22
	recordTypeApplicationData  recordType = 23
)

// SM2SigSM3 is the sm2sig_sm3 signature scheme (RFC 8998 §2), the only one
// this package signs or verifies handshake messages with.
const SM2SigSM3 uint16 = 0x0708

// CurveID is a TLS 1.3 named group.
type CurveID uint16

// Named groups: curveSM2 (RFC 8998 §2) and the hybrid of curveSM2 with
// ML-KEM-768 (codepoint 0x11EE, draft-ietf-tls-hybrid-design as gmsm and
// Tongsuo implement it: SM2 share first, then the ML-KEM share).
const (
	CurveSM2         CurveID = 41
	CurveSM2MLKEM768 CurveID = 0x11EE
)

func (c CurveID) String() string {
	switch c {
	case CurveSM2:
		return "curveSM2"
	case CurveSM2MLKEM768:
		return "curveSM2MLKEM768"
	}
	return "CurveID(" + strconv.Itoa(int(c)) + ")"
}

// DefaultCurvePreferences are the groups used when Config.CurvePreferences
// is nil: the post-quantum hybrid first, as crypto/tls prefers its own
// hybrid. A client sends a key share for the first only (with curveSM2's
// share, which the hybrid's SM2 half provides at no cost).
var DefaultCurvePreferences = []CurveID{CurveSM2MLKEM768, CurveSM2}

func supportedGroup(c CurveID) bool { return c == CurveSM2 || c == CurveSM2MLKEM768 }

// usableGroup reports whether this process can compute c's key exchange:
// the hybrid needs a CPU that gmsm's ML-KEM code runs on (mlkemUsable).
// supportedGroup, not this, decides whether a hello is TLS 1.3 with SM
// (route.go), so that the answer does not depend on the CPU.
func usableGroup(c CurveID) bool {
	return c == CurveSM2 || c == CurveSM2MLKEM768 && mlkemUsable
}

// Distinguishing identifiers of SM2 signatures (GB/T 32918.2 "ID").
const (
	// DefaultSignatureID is the ID of sm2sig_sm3 CertificateVerify
	// signatures: RFC 8998 §3.2.1, used by Tongsuo, GmSSL 3 and Tencent
	// Kona. Certificates themselves are signed with the GM/T 0009 ID
	// "1234567812345678", which certificate verification (smx509) uses.
	DefaultSignatureID = "TLSv1.3+GM+Cipher+Suite"
)

// ClientAuthType says how a server asks for and checks client
// certificates; the levels are those of TLCP (tlcp.ClientAuthType).
type ClientAuthType = tlcp.ClientAuthType

// Client authentication levels.
const (
	NoClientCert               = tlcp.NoClientCert
	RequestClientCert          = tlcp.RequestClientCert
	RequireAnyClientCert       = tlcp.RequireAnyClientCert
	VerifyClientCertIfGiven    = tlcp.VerifyClientCertIfGiven
	RequireAndVerifyClientCert = tlcp.RequireAndVerifyClientCert
)

func requiresCert(t ClientAuthType) bool {
	return t == RequireAnyClientCert || t == RequireAndVerifyClientCert
}

func verifiesCert(t ClientAuthType) bool { return t >= VerifyClientCertIfGiven }

// Certificate is one side's identity: an SM2 certificate chain (leaf
// first) and the signer of its key. For a site with a TLCP dual pair, it is
// the signing certificate and key; the encryption pair has no role in TLS
// 1.3.
//
// PrivateKey is called as Sign(rand, content, opts) with the whole
// CertificateVerify content and an *sm2.SM2SignerOption carrying the
// distinguishing ID (Config.SignatureID): the signer computes
// SM3(Z || content) itself, as gmsm's *sm2.PrivateKey does.
type Certificate struct {
	Certificate [][]byte
	PrivateKey  crypto.Signer
	// Leaf is the parsed leaf; parsed on first use when nil.
	Leaf *smx509.Certificate
}

// ConnectionState describes an established (or establishing) connection.
type ConnectionState struct {
	Version           uint16
	HandshakeComplete bool
	DidResume         bool
	CipherSuite       uint16
	// Group is the key exchange group of the handshake.
	Group CurveID
	// DidHelloRetryRequest is set when the server asked the client for
	// another key share.
	DidHelloRetryRequest bool
	NegotiatedProtocol   string
	// ServerName is the SNI host name the client sent (server side) or
	// the name it verified against (client side).
	ServerName string
	// PeerCertificates are the peer's certificates as sent; they are the
	// peer's identity only when VerifiedChains is not empty.
	PeerCertificates []*smx509.Certificate
	VerifiedChains   [][]*smx509.Certificate
}

// ClientHelloInfo describes a ClientHello for the server callbacks.
type ClientHelloInfo struct {
	CipherSuites      []uint16
	ServerName        string
	SupportedProtos   []string
	SupportedGroups   []CurveID
	SignatureSchemes  []uint16
	SupportedVersions []uint16
	Conn              net.Conn
	ctx               context.Context
}

// Context returns the context of the handshake in progress.
func (c *ClientHelloInfo) Context() context.Context { return c.ctx }

// CertificateRequestInfo describes a CertificateRequest for the client's
// GetClientCertificate callback.
type CertificateRequestInfo struct {
	// AcceptableCAs are DER distinguished names; empty means any.
	AcceptableCAs    [][]byte
	SignatureSchemes []uint16
	ctx              context.Context
}

// Context returns the context of the handshake in progress.
func (c *CertificateRequestInfo) Context() context.Context { return c.ctx }

// Config configures a client or server. A Config may be reused after it
// has been passed to a function of this package; it must not be changed
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
	// server asks for one; an empty Certificate sends none.
	GetClientCertificate func(*CertificateRequestInfo) (*Certificate, error)
	// GetConfigForClient, when set, may return a different Config for
	// this ClientHello (nil keeps this one). An error ends the handshake
	// with internal_error, or with the Alert of an *AlertError.
	GetConfigForClient func(*ClientHelloInfo) (*Config, error)

	// VerifyPeerCertificate, when set, is called after normal verification
	// (or instead of it with InsecureSkipVerify) on full handshakes.
	VerifyPeerCertificate func(rawCerts [][]byte, verifiedChains [][]*smx509.Certificate) error
	// VerifyConnection, when set, is called at the end of every handshake,
	// resumed or not; an error aborts it.
	VerifyConnection func(ConnectionState) error

	// RootCAs verifies server certificates; the system pool when nil.
	RootCAs *smx509.CertPool
	// ServerName is the name the client sends as SNI (unless it is an IP
	// address) and checks the server's certificate against.
	ServerName string
	// NextProtos are the ALPN protocols in preference order ("h2",
	// "http/1.1").
	NextProtos []string
	// InsecureSkipVerify makes the client accept any server certificate.
	// For tests and diagnostics only.
	InsecureSkipVerify bool

	// ClientAuth is the server's client-certificate policy.
	ClientAuth ClientAuthType
	// ClientCAs verifies client certificates; the system pool when nil.
	ClientCAs *smx509.CertPool
	// AcceptServerAuthClientCerts lets client certificates whose extended
	// key usage allows serverAuth but not clientAuth through, as
	// tlcp.Config does.
	AcceptServerAuthClientCerts bool

	// CipherSuites lists the enabled suites in preference order; the
	// server uses its own order. Nil means DefaultCipherSuites.
	CipherSuites []uint16
	// CurvePreferences lists the enabled groups in preference order; nil
	// means DefaultCurvePreferences.
	CurvePreferences []CurveID
	// SignatureID is the SM2 distinguishing ID of CertificateVerify
	// signatures, both made and checked; empty means DefaultSignatureID.
	// Only a peer that departs from RFC 8998 needs another (some early
	// implementations used "1234567812345678").
	SignatureID string

	// SessionTicketsDisabled turns resumption off (server: no tickets are
	// issued or accepted; client: none is offered).
	SessionTicketsDisabled bool
	// SessionCache, when set, keeps server sessions: a ticket is then a
	// random identity that names the session in the cache (a cache shared
	// between replicas stores what SessionState.Marshal returns). When
	// nil, a ticket carries the session itself, sealed with
	// SessionTicketKeys.
	SessionCache SessionCache
	// SessionTicketKeys seal self-contained tickets: the first seals, all
	// open (for rotation). When empty, a random key made for this Config
	// is used, so tickets resume only on this Config and its clones.
	SessionTicketKeys [][32]byte
	// SessionLifetime is how long a session resumes; DefaultSessionLifetime
	// when zero. RFC 8446 §4.6.1 caps it at 7 days.
	SessionLifetime time.Duration
	// SessionContext names what sessions belong to, such as a listener or
	// a site; sessions resume only under the same name.
	SessionContext string
	// ClientSessionCache keeps client tickets by server name; no
	// resumption is attempted when nil.
	ClientSessionCache ClientSessionCache

	ticketKeyOnce sync.Once
	ticketKey     [32]byte
}

// DefaultSessionLifetime is the lifetime of a session when
// Config.SessionLifetime is zero.
const DefaultSessionLifetime = 12 * time.Hour

const maxSessionLifetime = 7 * 24 * time.Hour

// Clone returns a shallow copy of c; a clone shares c's default ticket
// key, so tickets of one resume on the other.
func (c *Config) Clone() *Config {
	if c == nil {
		return nil
	}
	c.defaultTicketKey()
	n := &Config{
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
		NextProtos:                  c.NextProtos,
		InsecureSkipVerify:          c.InsecureSkipVerify,
		ClientAuth:                  c.ClientAuth,
		ClientCAs:                   c.ClientCAs,
		AcceptServerAuthClientCerts: c.AcceptServerAuthClientCerts,
		CipherSuites:                c.CipherSuites,
		CurvePreferences:            c.CurvePreferences,
		SignatureID:                 c.SignatureID,
		SessionTicketsDisabled:      c.SessionTicketsDisabled,
		SessionCache:                c.SessionCache,
		SessionTicketKeys:           c.SessionTicketKeys,
		SessionLifetime:             c.SessionLifetime,
		SessionContext:              c.SessionContext,
		ClientSessionCache:          c.ClientSessionCache,
	}
	n.ticketKeyOnce.Do(func() { n.ticketKey = c.ticketKey })
	return n
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

func (c *Config) curvePreferences() []CurveID {
	if c.CurvePreferences != nil {
		return c.CurvePreferences
	}
	return DefaultCurvePreferences
}

func (c *Config) signatureID() []byte {
	if c.SignatureID != "" {
		return []byte(c.SignatureID)
	}
	return []byte(DefaultSignatureID)
}

func (c *Config) sessionLifetime() time.Duration {
	switch {
	case c.SessionLifetime <= 0:
		return DefaultSessionLifetime
	case c.SessionLifetime > maxSessionLifetime:
		return maxSessionLifetime
	}
	return c.SessionLifetime
}

// defaultTicketKey returns the Config's own random ticket key.
func (c *Config) defaultTicketKey() [32]byte {
	c.ticketKeyOnce.Do(func() {
		if _, err := io.ReadFull(rand.Reader, c.ticketKey[:]); err != nil {
			panic("tls13: no randomness for the ticket key: " + err.Error())
		}
	})
	return c.ticketKey
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

var errNoCertificates = errors.New("no certificates configured")
