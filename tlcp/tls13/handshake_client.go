package tls13

import (
	"bytes"
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"slices"
	"time"

	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/smx509"
	gmtls13 "github.com/emmansun/gmsm/tls13"
)

// downgradeCanaries are the ServerHello random tails of a TLS 1.3 server
// that negotiated TLS 1.2 or 1.1 (RFC 8446 §4.1.3).
var (
	downgradeCanaryTLS12 = []byte("DOWNGRD\x01")
	downgradeCanaryTLS11 = []byte("DOWNGRD\x00")
)

// clientHandshakeState walks the client side of a handshake.
type clientHandshakeState struct {
	c            *Conn
	ctx          context.Context
	config       *Config
	hello        *clientHelloMsg
	serverHello  *serverHelloMsg
	keyShareKeys *gmtls13.KeySharePrivateKeys
	sentGroups   []CurveID
	transcript   hash.Hash
	suite        *cipherSuite

	session     *ClientSessionState
	earlySecret []byte
	binderKey   []byte

	handshakeSecret []byte
	clientHSSecret  []byte
	serverHSSecret  []byte
	masterSecret    []byte
	clientAppSecret []byte
	certRequest     *certificateRequestMsg
}

func (c *Conn) clientHandshake(ctx context.Context) error {
	cfg := c.config
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		return errors.New("tls13: either ServerName or InsecureSkipVerify must be set")
	}
	hs := &clientHandshakeState{c: c, ctx: ctx, config: cfg, transcript: sm3.New()}
	if err := hs.makeClientHello(); err != nil {
		return err
	}
	if err := hs.sendClientHello(); err != nil {
		return err
	}
	if err := hs.readServerHello(); err != nil {
		return err
	}
	if err := hs.establishHandshakeKeys(); err != nil {
		return err
	}
	if err := hs.readServerParameters(); err != nil {
		return err
	}
	if err := hs.readServerCertificate(); err != nil {
		return err
	}
	if err := hs.readServerFinished(); err != nil {
		return err
	}
	if err := hs.sendClientCertificate(); err != nil {
		return err
	}
	if err := hs.sendClientFinished(); err != nil {
		return err
	}
	if cfg.VerifyConnection != nil {
		if err := cfg.VerifyConnection(c.connectionStateLocked()); err != nil {
			return c.sendAlert(verifyAlert(err), err)
		}
	}
	c.isHandshakeComplete.Store(true)
	return nil
}

// ticketCacheKey is where a client keeps the tickets of a server.
func (c *Conn) clientTicketKey() string {
	if c.config.ServerName != "" {
		return c.config.ServerName
	}
	return c.conn.RemoteAddr().String()
}

func (hs *clientHandshakeState) makeClientHello() error {
	c := hs.c
	cfg := hs.config
	hello := &clientHelloMsg{
		vers:                legacyVersion,
		random:              make([]byte, 32),
		sessionID:           make([]byte, 32),
		cipherSuites:        cfg.cipherSuites(),
		compressionMethods:  []uint8{0},
		supportedVersions:   []uint16{VersionTLS13},
		signatureAlgorithms: []uint16{SM2SigSM3},
		alpnProtocols:       cfg.NextProtos,
		hasKeyShare:         true,
	}
	for _, g := range cfg.curvePreferences() {
		if usableGroup(g) {
			hello.supportedGroups = append(hello.supportedGroups, g)
		}
	}
	if len(hello.supportedGroups) == 0 {
		return errors.New("tls13: no supported group in CurvePreferences")
	}
	if host := hostnameForVerify(cfg.ServerName); host != "" && net.ParseIP(host) == nil {
		hello.serverName = host
	}
	if _, err := io.ReadFull(cfg.rand(), hello.random); err != nil {
		return err
	}
	// A session ID makes middleboxes take the handshake for a resumed TLS
	// 1.2 one (RFC 8446 Appendix D.4).
	if _, err := io.ReadFull(cfg.rand(), hello.sessionID); err != nil {
		return err
	}
	if err := hs.addKeyShares(hello, hello.supportedGroups[0]); err != nil {
		return err
	}
	if !cfg.SessionTicketsDisabled {
		hello.pskModes = []uint8{pskModeDHE}
	}
	hs.hello = hello
	c.ticketKey = c.clientTicketKey()
	hs.loadSession()
	return nil
}

// addKeyShares generates the key shares for group: the hybrid's share
// comes with curveSM2's share of the same SM2 key.
func (hs *clientHandshakeState) addKeyShares(hello *clientHelloMsg, group CurveID) error {
	kex, err := gmtls13.NewKeyExchange(gmtls13.CurveID(group))
	if err != nil {
		return err
	}
	priv, shares, err := kex.KeyShares(hs.config.rand())
	if err != nil {
		return err
	}
	hs.keyShareKeys = priv
	hello.keyShares = hello.keyShares[:0]
	hs.sentGroups = hs.sentGroups[:0]
	for _, ks := range shares {
		g := CurveID(ks.Group)
		if !slices.Contains(hello.supportedGroups, g) {
			continue
		}
		hello.keyShares = append(hello.keyShares, keyShare{group: g, data: ks.Data})
		hs.sentGroups = append(hs.sentGroups, g)
	}
	return nil
}

// loadSession adds a cached ticket to the hello, if one is alive and its
// suite is enabled.
func (hs *clientHandshakeState) loadSession() {
	c := hs.c
	cfg := hs.config
	cache := cfg.ClientSessionCache
	if cfg.SessionTicketsDisabled || cache == nil {
		return
	}
	cs, ok := cache.Get(c.ticketKey)
	if !ok || cs == nil {
		return
	}
	now := cfg.now()
	if now.After(cs.receivedAt.Add(cs.lifetime)) || !slices.Contains(hs.hello.cipherSuites, cs.cipherSuite) {
		cache.Put(c.ticketKey, nil)
		return
	}
	// The server's certificate must still be valid (as crypto/tls checks).
	if !cfg.InsecureSkipVerify && (len(cs.serverCerts) == 0 || !validAt(cs.serverCerts[0], now)) {
		cache.Put(c.ticketKey, nil)
		return
	}
	age := uint32(now.Sub(cs.receivedAt) / time.Millisecond)
	hs.session = cs
	hs.hello.pskIdentities = []pskIdentity{{label: cs.ticket, age: age + cs.ageAdd}}
	hs.hello.pskBinders = [][]byte{make([]byte, hashLen)}
	hs.earlySecret = earlySecret(cs.psk)
	hs.binderKey = binderKey(hs.earlySecret)
}

// writeBinders fills in the PSK binder over the truncated hello, with
// the transcript so far (empty, or the retry's).
func (hs *clientHandshakeState) writeBinders(before hash.Hash) {
	if hs.session == nil {
		return
	}
	raw := hs.hello.marshal()
	before.Write(raw[:len(raw)-hs.hello.bindersLen()])
	hs.hello.pskBinders = [][]byte{finishedMAC(hs.binderKey, before)}
	hs.hello.marshal()
}

func (hs *clientHandshakeState) sendClientHello() error {
	hs.writeBinders(sm3.New())
	return hs.c.writeHandshake(hs.hello.marshal(), hs.transcript)
}

func (hs *clientHandshakeState) readServerHello() error {
	c := hs.c
	msg, err := c.readHandshake(typeServerHello, nil)
	if err != nil {
		return err
	}
	sh := new(serverHelloMsg)
	if !sh.unmarshal(msg) {
		return c.sendAlert(AlertDecodeError, errors.New("malformed ServerHello"))
	}
	if err := hs.checkServerHello(sh); err != nil {
		return err
	}
	if isHelloRetryRequest(sh.random) {
		if err := hs.processHelloRetryRequest(sh); err != nil {
			return err
		}
		msg, err = c.readHandshake(typeServerHello, nil)
		if err != nil {
			return err
		}
		sh = new(serverHelloMsg)
		if !sh.unmarshal(msg) {
			return c.sendAlert(AlertDecodeError, errors.New("malformed ServerHello"))
		}
		if isHelloRetryRequest(sh.random) {
			return c.sendAlert(AlertUnexpectedMessage, errors.New("a second HelloRetryRequest"))
		}
		retrySuite := hs.suite.id
		if err := hs.checkServerHello(sh); err != nil {
			return err
		}
		if sh.cipherSuite != retrySuite {
			return c.sendAlert(AlertIllegalParameter, errors.New("ServerHello suite differs from the HelloRetryRequest's"))
		}
	}
	hs.transcript.Write(sh.raw)
	hs.serverHello = sh
	if sh.serverShare.group == 0 || !slices.Contains(hs.sentGroups, sh.serverShare.group) {
		return c.sendAlert(AlertIllegalParameter, errors.New("server key share for a group the client sent no share for"))
	}
	if sh.selectedGroup != 0 || len(sh.cookie) > 0 {
		return c.sendAlert(AlertIllegalParameter, errors.New("ServerHello with HelloRetryRequest extensions"))
	}
	c.group = sh.serverShare.group
	if sh.hasPSK {
		if hs.session == nil || sh.selectedIdentity != 0 {
			return c.sendAlert(AlertIllegalParameter, errors.New("server selected a PSK the client did not offer"))
		}
		if cipherSuiteByID(hs.session.cipherSuite) == nil {
			return c.sendAlert(AlertIllegalParameter, errors.New("resumed session's suite is unknown"))
		}
		c.didResume = true
		c.peerCertificates = hs.session.serverCerts
		c.verifiedChains = hs.session.verified
	} else {
		hs.earlySecret = nil
		if hs.session != nil {
			// The server declined the ticket: it will not take it again.
			hs.config.ClientSessionCache.Put(c.ticketKey, nil)
			hs.session = nil
		}
	}
	return nil
}

// checkServerHello checks what a ServerHello or HelloRetryRequest must
// say.
func (hs *clientHandshakeState) checkServerHello(sh *serverHelloMsg) error {
	c := hs.c
	if sh.supportedVersion != VersionTLS13 {
		tail := sh.random[24:]
		if bytes.Equal(tail, downgradeCanaryTLS12) || bytes.Equal(tail, downgradeCanaryTLS11) {
			return c.sendAlert(AlertIllegalParameter, errors.New("server signals a downgrade from TLS 1.3"))
		}
		return c.sendAlert(AlertProtocolVersion, fmt.Errorf("server selected version %#04x, not TLS 1.3", max(sh.supportedVersion, sh.vers)))
	}
	if sh.vers != legacyVersion {
		return c.sendAlert(AlertIllegalParameter, fmt.Errorf("ServerHello legacy_version %#04x", sh.vers))
	}
	if !bytes.Equal(sh.sessionID, hs.hello.sessionID) {
		return c.sendAlert(AlertIllegalParameter, errors.New("server did not echo the session ID"))
	}
	if sh.compressionMethod != 0 {
		return c.sendAlert(AlertIllegalParameter, errors.New("server selected compression"))
	}
	if !slices.Contains(hs.hello.cipherSuites, sh.cipherSuite) || cipherSuiteByID(sh.cipherSuite) == nil {
		return c.sendAlert(AlertIllegalParameter, fmt.Errorf("server selected suite %s, which was not offered", CipherSuiteName(sh.cipherSuite)))
	}
	hs.suite = cipherSuiteByID(sh.cipherSuite)
	c.cipherSuite = sh.cipherSuite
	return nil
}

func (hs *clientHandshakeState) processHelloRetryRequest(hrr *serverHelloMsg) error {
	c := hs.c
	c.didHRR = true
	group := hrr.selectedGroup
	if hrr.serverShare.group != 0 || hrr.hasPSK {
		return c.sendAlert(AlertIllegalParameter, errors.New("malformed HelloRetryRequest"))
	}
	if group == 0 && len(hrr.cookie) == 0 {
		return c.sendAlert(AlertIllegalParameter, errors.New("HelloRetryRequest that changes nothing"))
	}
	if group != 0 {
		if !slices.Contains(hs.hello.supportedGroups, group) || slices.Contains(hs.sentGroups, group) {
			return c.sendAlert(AlertIllegalParameter, fmt.Errorf("HelloRetryRequest for group %s", group))
		}
		if err := hs.addKeyShares(hs.hello, group); err != nil {
			return c.sendAlert(AlertInternalError, err)
		}
		// Only the one share asked for.
		hs.hello.keyShares = hs.hello.keyShares[:1]
		hs.sentGroups = hs.sentGroups[:1]
	}
	hs.hello.cookie = hrr.cookie
	// The transcript restarts with the hash of the first hello.
	hs.transcript = messageHashOf(hs.hello.raw)
	hs.transcript.Write(hrr.raw)
	if hs.session != nil {
		if hs.session.cipherSuite != hs.suite.id && cipherSuiteByID(hs.session.cipherSuite) == nil {
			hs.session = nil
			hs.hello.pskIdentities = nil
			hs.hello.pskBinders = nil
		} else {
			hs.writeBinders(cloneHash(hs.transcript))
		}
	}
	if err := c.writeChangeCipherSpec(); err != nil {
		return err
	}
	return c.writeHandshake(hs.hello.marshal(), hs.transcript)
}

func (hs *clientHandshakeState) establishHandshakeKeys() error {
	c := hs.c
	sh := hs.serverHello
	kex, err := gmtls13.NewKeyExchange(gmtls13.CurveID(sh.serverShare.group))
	if err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	shared, err := kex.ClientSharedSecret(hs.keyShareKeys, sh.serverShare.data)
	if err != nil {
		return c.sendAlert(AlertIllegalParameter, fmt.Errorf("server %s key share: %w", sh.serverShare.group, err))
	}
	hs.keyShareKeys = nil
	if hs.earlySecret == nil {
		hs.earlySecret = earlySecret(nil)
	}
	hs.handshakeSecret = handshakeSecret(hs.earlySecret, shared)
	clear(shared)
	hs.clientHSSecret = deriveSecret(hs.handshakeSecret, labelClientHandshake, hs.transcript)
	hs.serverHSSecret = deriveSecret(hs.handshakeSecret, labelServerHandshake, hs.transcript)
	if err := c.setReadSecret(hs.suite, hs.serverHSSecret); err != nil {
		return err
	}
	if !c.didHRR {
		// Middlebox compatibility: one change_cipher_spec before the
		// first protected record (after a retry it was sent already).
		if err := c.writeChangeCipherSpec(); err != nil {
			return err
		}
	}
	// Alerts from here on are protected, as the server expects.
	return c.setWriteSecret(hs.suite, hs.clientHSSecret)
}

func (hs *clientHandshakeState) readServerParameters() error {
	c := hs.c
	msg, err := c.readHandshake(typeEncryptedExtensions, hs.transcript)
	if err != nil {
		return err
	}
	var ee encryptedExtensionsMsg
	if !ee.unmarshal(msg) {
		return c.sendAlert(AlertDecodeError, errors.New("malformed EncryptedExtensions"))
	}
	if ee.earlyData {
		return c.sendAlert(AlertUnsupportedExtension, errors.New("server accepted early data that was not offered"))
	}
	if ee.alpnProtocol != "" {
		if !slices.Contains(hs.config.NextProtos, ee.alpnProtocol) {
			return c.sendAlert(AlertUnsupportedExtension, fmt.Errorf("server selected ALPN %q, which was not offered", ee.alpnProtocol))
		}
		c.negotiatedProtocol = ee.alpnProtocol
	}
	c.serverName = hs.config.ServerName
	return nil
}

// readServerCertificate reads CertificateRequest, Certificate and
// CertificateVerify on a full handshake and verifies the server.
func (hs *clientHandshakeState) readServerCertificate() error {
	if hs.c.didResume {
		return nil
	}
	c := hs.c
	cfg := hs.config
	msg, err := c.readHandshakeBytes()
	if err != nil {
		return err
	}
	if msg[0] == typeCertificateRequest {
		req := new(certificateRequestMsg)
		if !req.unmarshal(msg) || len(req.context) != 0 {
			return c.sendAlert(AlertDecodeError, errors.New("malformed CertificateRequest"))
		}
		hs.transcript.Write(msg)
		hs.certRequest = req
		if msg, err = c.readHandshakeBytes(); err != nil {
			return err
		}
	}
	if msg[0] != typeCertificate {
		return c.sendAlert(AlertUnexpectedMessage, fmt.Errorf("got %s, want Certificate", messageName(msg[0])))
	}
	var cm certificateMsg
	if !cm.unmarshal(msg) || len(cm.context) != 0 {
		return c.sendAlert(AlertDecodeError, errors.New("malformed server Certificate"))
	}
	hs.transcript.Write(msg)
	if len(cm.certificates) == 0 {
		return c.sendAlert(AlertDecodeError, errors.New("server sent no certificate"))
	}
	certs, err := parseCertificates(cm.certificates)
	if err != nil {
		return c.sendAlert(AlertBadCertificate, fmt.Errorf("server %v", err))
	}
	if err := checkLeafUsage(certs[0]); err != nil {
		return c.sendAlert(AlertUnsupportedCertificate, fmt.Errorf("server %v", err))
	}
	var chains [][]*smx509.Certificate
	if !cfg.InsecureSkipVerify {
		chains, err = verifyChain(certs, cfg.RootCAs, hostnameForVerify(cfg.ServerName), cfg.now(), serverAuthUsages)
		if err != nil {
			return c.sendAlert(certificateAlert(err), fmt.Errorf("server certificate: %w", err))
		}
	}
	if cfg.VerifyPeerCertificate != nil {
		if err := cfg.VerifyPeerCertificate(cm.certificates, chains); err != nil {
			return c.sendAlert(AlertBadCertificate, err)
		}
	}
	msg, err = c.readHandshake(typeCertificateVerify, nil)
	if err != nil {
		return err
	}
	var cv certificateVerifyMsg
	if !cv.unmarshal(msg) {
		return c.sendAlert(AlertDecodeError, errors.New("malformed server CertificateVerify"))
	}
	if err := cfg.verifyCertificateVerify(certs[0], &cv, serverSignatureContext, hs.transcript); err != nil {
		return c.sendAlert(AlertDecryptError, fmt.Errorf("server %w", err))
	}
	hs.transcript.Write(msg)
	c.peerCertificates = certs
	c.verifiedChains = chains
	return nil
}

func (hs *clientHandshakeState) readServerFinished() error {
	c := hs.c
	want := finishedMAC(hs.serverHSSecret, hs.transcript)
	msg, err := c.readHandshake(typeFinished, hs.transcript)
	if err != nil {
		return err
	}
	var fin finishedMsg
	if !fin.unmarshal(msg) {
		return c.sendAlert(AlertDecodeError, errors.New("malformed server Finished"))
	}
	if !hmac.Equal(want, fin.verifyData) {
		return c.sendAlert(AlertDecryptError, errors.New("server Finished does not verify"))
	}
	hs.masterSecret = masterSecret(hs.handshakeSecret)
	serverApp := deriveSecret(hs.masterSecret, labelServerApplication, hs.transcript)
	hs.clientAppSecret = deriveSecret(hs.masterSecret, labelClientApplication, hs.transcript)
	return c.setReadSecret(hs.suite, serverApp)
}

// sendClientCertificate answers a CertificateRequest.
func (hs *clientHandshakeState) sendClientCertificate() error {
	c := hs.c
	cfg := hs.config
	c.out.Lock()
	c.buffering = true
	c.out.Unlock()
	if hs.certRequest == nil {
		return nil
	}
	if !slices.Contains(hs.certRequest.signatureAlgorithms, SM2SigSM3) {
		// No signature this client can make: send no certificate.
		return c.writeHandshake((&certificateMsg{}).marshal(), hs.transcript)
	}
	var cert *Certificate
	if cfg.GetClientCertificate != nil {
		var err error
		cert, err = cfg.GetClientCertificate(&CertificateRequestInfo{
			AcceptableCAs:    hs.certRequest.certificateAuthorities,
			SignatureSchemes: hs.certRequest.signatureAlgorithms,
			ctx:              hs.ctx,
		})
		if err != nil {
			return c.sendAlert(AlertInternalError, err)
		}
	} else if len(cfg.Certificates) > 0 {
		cert = &cfg.Certificates[0]
	}
	if cert == nil || len(cert.Certificate) == 0 || cert.PrivateKey == nil {
		return c.writeHandshake((&certificateMsg{}).marshal(), hs.transcript)
	}
	if err := c.writeHandshake((&certificateMsg{certificates: cert.Certificate}).marshal(), hs.transcript); err != nil {
		return err
	}
	cv, err := cfg.signCertificateVerify(cert, clientSignatureContext, hs.transcript)
	if err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	return c.writeHandshake(cv.marshal(), hs.transcript)
}

func (hs *clientHandshakeState) sendClientFinished() error {
	c := hs.c
	fin := &finishedMsg{verifyData: finishedMAC(hs.clientHSSecret, hs.transcript)}
	if err := c.writeHandshake(fin.marshal(), hs.transcript); err != nil {
		return err
	}
	if err := c.flushFlight(); err != nil {
		return err
	}
	if err := c.setWriteSecret(hs.suite, hs.clientAppSecret); err != nil {
		return err
	}
	c.resumptionSecret = deriveSecret(hs.masterSecret, labelResumptionMaster, hs.transcript)
	return nil
}
