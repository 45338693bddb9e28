package tlcp

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"
	"golang.org/x/crypto/cryptobyte"
)

// clientHandshakeState holds one client handshake in progress.
type clientHandshakeState struct {
	c           *Conn
	ctx         context.Context
	hello       *clientHelloMsg
	serverHello *serverHelloMsg
	suite       *cipherSuite
	session     *ClientSessionState
	sessionKey  string
	// clientCert is the signing certificate sent in a full handshake.
	clientCert   []byte
	masterSecret []byte
	// mac is HMAC-SM3 keyed with the master secret, for the key schedule.
	mac        *hmacSM3
	transcript transcript
}

func (c *Conn) clientHandshake(ctx context.Context) error {
	if c.config == nil {
		c.config = &Config{}
	}
	cfg := c.config
	if !cfg.InsecureSkipVerify && cfg.ServerName == "" {
		return errors.New("tlcp: either ServerName or InsecureSkipVerify must be set in the Config")
	}
	hs := &clientHandshakeState{c: c, ctx: ctx}
	hs.transcript.h = getTranscriptHash()
	// The key schedule's HMAC and the transcript's hash are needed no
	// longer than the handshake.
	defer func() {
		putHandshakeMAC(hs.mac)
		putTranscriptHash(hs.transcript.h)
	}()
	// The raw messages are kept only for a CertificateVerify signed over
	// them, until it is sent.
	hs.transcript.keepRaw = cfg.ClientRawCertificateVerify
	if err := hs.makeClientHello(); err != nil {
		return err
	}
	if err := c.writeHandshake(hs.hello, &hs.transcript); err != nil {
		return err
	}
	msg, err := c.readHandshake(&hs.transcript)
	if err != nil {
		return err
	}
	sh, ok := msg.(*serverHelloMsg)
	if !ok {
		return c.unexpectedMessageError("ServerHello", msg)
	}
	hs.serverHello = sh
	if err := hs.processServerHello(); err != nil {
		return err
	}
	if c.didResume {
		hs.transcript.keepRaw = false
		hs.transcript.raw = nil
		if err := hs.verifyConnection(); err != nil {
			return err
		}
		if err := hs.establishKeys(); err != nil {
			return err
		}
		if err := hs.readFinished(); err != nil {
			return err
		}
		c.buffering = true
		if err := hs.sendFinished(); err != nil {
			return err
		}
		if err := c.flush(); err != nil {
			return err
		}
	} else {
		if err := hs.doFullHandshake(); err != nil {
			return err
		}
		if err := hs.establishKeys(); err != nil {
			return err
		}
		if err := hs.sendFinished(); err != nil {
			return err
		}
		if err := c.flush(); err != nil {
			return err
		}
		c.buffering = false
		if err := hs.readFinished(); err != nil {
			return err
		}
	}
	c.buffering = false
	hs.saveSession()
	c.isHandshakeComplete.Store(true)
	return nil
}

// canECDHE reports whether the client has an encryption key that can take
// part in SM2 key agreement, which the ECDHE suites require.
func (c *Conn) canECDHE() bool {
	cfg := c.config
	if len(cfg.Certificates) > 0 {
		cert := &cfg.Certificates[0]
		_, ok := cert.EncKey.(KeyAgreementKey)
		return ok && len(cert.EncCertificate) > 0
	}
	// A callback may have one; offer ECDHE only when the suites were
	// chosen explicitly.
	return cfg.GetClientCertificate != nil && cfg.CipherSuites != nil
}

func (hs *clientHandshakeState) makeClientHello() error {
	c := hs.c
	cfg := c.config
	if c.helloOverride != nil {
		return hs.useHelloOverride()
	}
	hello := &clientHelloMsg{
		vers:               VersionTLCP,
		random:             make([]byte, 32),
		compressionMethods: []uint8{0},
		alpnProtocols:      cfg.NextProtos,
		ocspStapling:       cfg.RequestOCSPStaple,
	}
	if _, err := io.ReadFull(cfg.rand(), hello.random); err != nil {
		return fmt.Errorf("tlcp: %w", err)
	}
	putUnixTime(hello.random, cfg.now())
	ecdheOK := c.canECDHE()
	for _, id := range cfg.cipherSuites() {
		s := cipherSuiteByID(id)
		if s == nil || (s.ecdhe && !ecdheOK) {
			continue
		}
		hello.cipherSuites = append(hello.cipherSuites, id)
	}
	if len(hello.cipherSuites) == 0 {
		return errors.New("tlcp: no usable cipher suite: the ECDHE suites need a client encryption certificate whose key supports SM2 key agreement")
	}
	if cfg.SendServerName && cfg.ServerName != "" {
		// No IP literal and nothing a server would refuse as a host name.
		if name := hostnameForVerify(cfg.ServerName); net.ParseIP(name) == nil && validServerName([]byte(name)) {
			hello.serverName = name
		}
	}
	if cfg.ClientSessionCache != nil && !cfg.SessionsDisabled {
		hs.sessionKey = clientSessionCacheKey(c.conn.RemoteAddr(), cfg)
		if s, ok := cfg.ClientSessionCache.Get(hs.sessionKey); ok && s != nil && slices.Contains(hello.cipherSuites, s.cipherSuite) && hs.canResume(s) {
			hs.session = s
			hello.sessionID = s.sessionID
		}
	}
	hs.hello = hello
	return nil
}

// canResume reports whether the client may offer session s: only if its
// configuration would accept the server's certificates now, as crypto/tls
// checks. A session made with InsecureSkipVerify is not offered by a
// configuration that verifies.
func (hs *clientHandshakeState) canResume(s *ClientSessionState) bool {
	cfg := hs.c.config
	if len(s.serverCertificates) < 2 {
		return false
	}
	now := cfg.now()
	if !validAt(s.serverCertificates[0], now) || !validAt(s.serverCertificates[1], now) {
		cfg.ClientSessionCache.Put(hs.sessionKey, nil)
		return false
	}
	if cfg.InsecureSkipVerify {
		return true
	}
	if len(s.verifiedChains) == 0 {
		return false
	}
	// The cache key should see to the name; a cache keyed otherwise may
	// not.
	if s.serverCertificates[0].VerifyHostname(hostnameForVerify(cfg.ServerName)) != nil {
		return false
	}
	for _, chain := range s.verifiedChains {
		if chainValidAt(chain, cfg.RootCAs, now) {
			return true
		}
	}
	cfg.ClientSessionCache.Put(hs.sessionKey, nil)
	return false
}

func (hs *clientHandshakeState) processServerHello() error {
	c := hs.c
	sh := hs.serverHello
	if sh.vers != VersionTLCP {
		return c.sendAlert(AlertProtocolVersion, fmt.Errorf("server chose version %#04x, want TLCP 1.1 (0x0101)", sh.vers))
	}
	c.haveVers = true
	c.plainVers = 0
	if sh.compressionMethod != 0 {
		return c.sendAlert(AlertIllegalParameter, errors.New("server chose a compression method"))
	}
	if !slices.Contains(hs.hello.cipherSuites, sh.cipherSuite) {
		return c.sendAlert(AlertIllegalParameter, fmt.Errorf("server chose cipher suite %s, which was not offered", CipherSuiteName(sh.cipherSuite)))
	}
	if cipherSuiteByID(sh.cipherSuite) == nil {
		// Only a hello of ClientWithHello offers suites that are not TLCP.
		return c.sendAlert(AlertIllegalParameter, fmt.Errorf("server chose cipher suite %#04x, which is not a TLCP suite", sh.cipherSuite))
	}
	for _, ext := range sh.extensionTypes {
		if (ext == extensionServerName && hs.hello.serverName == "") || (ext == extensionALPN && len(hs.hello.alpnProtocols) == 0) ||
			(ext == extensionStatusRequest && !hs.hello.ocspStapling) {
			return c.sendAlert(AlertUnsupportedExtension, fmt.Errorf("server sent extension %d, which was not offered", ext))
		}
	}
	if sh.alpnProtocol != "" {
		if !slices.Contains(hs.hello.alpnProtocols, sh.alpnProtocol) {
			return c.sendAlert(AlertIllegalParameter, fmt.Errorf("server chose ALPN protocol %q, which was not offered", sh.alpnProtocol))
		}
		c.negotiatedProtocol = sh.alpnProtocol
	}
	hs.suite = cipherSuiteByID(sh.cipherSuite)
	c.cipherSuite = sh.cipherSuite
	c.sessionID = sh.sessionID
	c.serverName = c.config.ServerName

	if hs.session != nil && len(sh.sessionID) > 0 && bytes.Equal(sh.sessionID, hs.session.sessionID) {
		if sh.cipherSuite != hs.session.cipherSuite {
			return c.sendAlert(AlertIllegalParameter, errors.New("server resumed a session with a different cipher suite"))
		}
		c.didResume = true
		hs.masterSecret = hs.session.masterSecret
		hs.mac = getHandshakeMAC(hs.masterSecret)
		c.peerCertificates = hs.session.serverCertificates
		c.verifiedChains = hs.session.verifiedChains
		return nil
	}
	if hs.session != nil {
		// Not resumed: the server forgot the session.
		hs.c.config.ClientSessionCache.Put(hs.sessionKey, nil)
		hs.session = nil
	}
	return nil
}

func (hs *clientHandshakeState) doFullHandshake() error {
	c := hs.c
	cfg := c.config

	msg, err := c.readHandshake(&hs.transcript)
	if err != nil {
		return err
	}
	certMsg, ok := msg.(*certificateMsg)
	if !ok {
		return c.unexpectedMessageError("Certificate", msg)
	}
	if err := hs.verifyServerCertificate(certMsg.certificates); err != nil {
		return err
	}

	msg, err = c.readHandshake(&hs.transcript)
	if err != nil {
		return err
	}
	// The CertificateStatus a ServerHello announced may still not come
	// (RFC 6066 §8).
	if cs, ok := msg.(*certificateStatusMsg); ok {
		if !hs.serverHello.ocspStapling {
			return c.unexpectedMessageError("ServerKeyExchange", msg)
		}
		c.ocspResponse = cs.response
		if msg, err = c.readHandshake(&hs.transcript); err != nil {
			return err
		}
	}
	skx, ok := msg.(*serverKeyExchangeMsg)
	if !ok {
		return c.unexpectedMessageError("ServerKeyExchange", msg)
	}
	params, sig, ok := parseServerKeyExchange(skx.key, hs.suite.ecdhe)
	if !ok {
		return c.sendAlert(AlertDecodeError, errors.New("malformed ServerKeyExchange"))
	}
	var signed []byte
	if hs.suite.ecdhe {
		signed = ecdheSignedParams(nil, hs.hello.random, hs.serverHello.random, params)
	} else {
		signed = eccSignedParams(nil, hs.hello.random, hs.serverHello.random, certMsg.certificates[1])
	}
	signPub, _ := leafSM2Key(c.peerCertificates[0])
	if !verifyMessage(signPub, signed, sig) {
		return c.sendAlert(AlertDecryptError, errors.New("ServerKeyExchange signature does not verify with the server's signing certificate"))
	}

	msg, err = c.readHandshake(&hs.transcript)
	if err != nil {
		return err
	}
	var certReq *certificateRequestMsg
	if cr, ok := msg.(*certificateRequestMsg); ok {
		certReq = cr
		if msg, err = c.readHandshake(&hs.transcript); err != nil {
			return err
		}
	}
	if _, ok := msg.(*serverHelloDoneMsg); !ok {
		return c.unexpectedMessageError("ServerHelloDone", msg)
	}
	if hs.suite.ecdhe && certReq == nil {
		return c.sendAlert(AlertUnexpectedMessage, errors.New("server chose an ECDHE suite without asking for the client certificate"))
	}

	// The client's flight: [Certificate], ClientKeyExchange,
	// [CertificateVerify], ChangeCipherSpec, Finished in one write.
	c.buffering = true
	var cert *Certificate
	if certReq != nil {
		cert, err = hs.getClientCertificate(certReq)
		if err != nil {
			return c.sendAlert(AlertInternalError, err)
		}
		if hs.suite.ecdhe && !cert.hasEnc() {
			return c.sendAlert(AlertHandshakeFailure, errors.New("the server chose an ECDHE suite, which needs a client encryption certificate, and none is configured"))
		}
		var list [][]byte
		if cert != nil {
			list = cert.wireList(nil, hs.suite.ecdhe || !cfg.ClientSignCertOnly)
		}
		if len(list) > 0 {
			hs.clientCert = list[0]
		}
		if err := c.writeHandshake(&certificateMsg{certificates: list}, &hs.transcript); err != nil {
			return err
		}
	}

	preMasterSecret, ckx, err := hs.clientKeyExchange(params, cert)
	if err != nil {
		return err
	}
	if err := c.writeHandshake(ckx, &hs.transcript); err != nil {
		return err
	}
	hs.mac = getHandshakeMAC(nil)
	hs.masterSecret = masterFromPreMaster(hs.mac, preMasterSecret, hs.hello.random, hs.serverHello.random)
	clear(preMasterSecret)

	if cert != nil && len(cert.SignCertificate) > 0 {
		if err := hs.sendCertificateVerify(cert); err != nil {
			return err
		}
	}
	hs.transcript.keepRaw = false
	hs.transcript.raw = nil
	return nil
}

// sendCertificateVerify signs the handshake so far with the client's
// signing key: its SM3 hash by default, the messages themselves under
// ClientRawCertificateVerify. Either way SM2 hashes the input again with
// the signer's Z.
func (hs *clientHandshakeState) sendCertificateVerify(cert *Certificate) error {
	c := hs.c
	cfg := c.config
	signed := hs.transcript.sum()
	if cfg.ClientRawCertificateVerify {
		signed = hs.transcript.raw
	}
	sig, err := signMessage(cert.SignKey, cfg.rand(), signed)
	if err != nil {
		return c.sendAlert(AlertInternalError, fmt.Errorf("signing CertificateVerify: %w", err))
	}
	return c.writeHandshake(&certificateVerifyMsg{signature: sig}, &hs.transcript)
}

// getClientCertificate picks the identity to answer a CertificateRequest
// with; nil sends an empty certificate list.
func (hs *clientHandshakeState) getClientCertificate(req *certificateRequestMsg) (*Certificate, error) {
	cfg := hs.c.config
	if cfg.GetClientCertificate != nil {
		return cfg.GetClientCertificate(&CertificateRequestInfo{
			AcceptableCAs:    req.certificateAuthorities,
			CertificateTypes: req.certificateTypes,
			CipherSuite:      hs.suite.id,
			ctx:              hs.ctx,
		})
	}
	if len(cfg.Certificates) > 0 {
		return &cfg.Certificates[0], nil
	}
	return nil, nil
}

// clientKeyExchange computes the pre-master secret and the message that
// conveys it.
func (hs *clientHandshakeState) clientKeyExchange(serverParams []byte, cert *Certificate) ([]byte, *clientKeyExchangeMsg, error) {
	c := hs.c
	cfg := c.config
	encPub, err := leafSM2Key(c.peerCertificates[1])
	if err != nil {
		return nil, nil, c.sendAlert(AlertUnsupportedCertificate, fmt.Errorf("server encryption certificate: %w", err))
	}
	if hs.suite.ecdhe {
		s := cryptobyte.String(serverParams)
		point, ok := parseECDHEParams(&s)
		if !ok {
			return nil, nil, c.sendAlert(AlertDecodeError, errors.New("malformed ServerECDHEParams"))
		}
		static, ok := cert.EncKey.(KeyAgreementKey)
		if !ok {
			return nil, nil, c.sendAlert(AlertInternalError, fmt.Errorf("client encryption key of type %T cannot do SM2 key agreement", cert.EncKey))
		}
		eph, err := ecdh.P256().GenerateKey(cfg.rand())
		if err != nil {
			return nil, nil, c.sendAlert(AlertInternalError, err)
		}
		ownEnc, err := encPublicKey(cert)
		if err != nil {
			return nil, nil, c.sendAlert(AlertInternalError, fmt.Errorf("client encryption certificate: %w", err))
		}
		pms, err := sm2KeyExchange(false, static, ownEnc, eph, encPub, point)
		if err != nil {
			return nil, nil, c.sendAlert(AlertIllegalParameter, fmt.Errorf("SM2 key exchange: %w", err))
		}
		body := marshalECDHEParams(eph.PublicKey().Bytes())
		if cfg.ClientECDHEParamsAsVector {
			body = append([]byte{byte(len(body) >> 8), byte(len(body))}, body...)
		}
		return pms, &clientKeyExchangeMsg{key: body}, nil
	}
	pms := make([]byte, preMasterSecretLength)
	pms[0], pms[1] = byte(VersionTLCP>>8), byte(VersionTLCP&0xff)
	if _, err := io.ReadFull(cfg.rand(), pms[2:]); err != nil {
		return nil, nil, c.sendAlert(AlertInternalError, err)
	}
	ct, err := sm2.Encrypt(cfg.rand(), encPub, pms, sm2.ASN1EncrypterOpts)
	if err != nil {
		return nil, nil, c.sendAlert(AlertInternalError, fmt.Errorf("encrypting the pre-master secret: %w", err))
	}
	body := make([]byte, 0, 2+len(ct))
	body = append(body, byte(len(ct)>>8), byte(len(ct)))
	body = append(body, ct...)
	return pms, &clientKeyExchangeMsg{key: body}, nil
}

// verifyServerCertificate parses and checks the server's certificate list:
// [0] signing, [1] encryption, the rest chain.
func (hs *clientHandshakeState) verifyServerCertificate(list [][]byte) error {
	c := hs.c
	cfg := c.config
	if len(list) < 2 {
		return c.sendAlert(AlertBadCertificate, fmt.Errorf("server sent %d certificates; TLCP needs a signing and an encryption certificate", len(list)))
	}
	certs, err := parseCertificates(list)
	if err != nil {
		return c.sendAlert(AlertBadCertificate, fmt.Errorf("server %v", err))
	}
	if err := checkKeyUsages(certs[0], certs[1], !hs.suite.ecdhe); err != nil {
		return c.sendAlert(AlertUnsupportedCertificate, fmt.Errorf("server %v", err))
	}
	c.peerCertificates = certs
	if !cfg.InsecureSkipVerify {
		chains, err := verifyPeerChains(certs[0], certs[1], certs[2:], cfg.RootCAs, hostnameForVerify(cfg.ServerName), cfg.now(), serverAuthUsages)
		if err != nil {
			return c.sendAlert(certificateAlert(err), fmt.Errorf("server certificate: %w", err))
		}
		c.verifiedChains = chains
	}
	if cfg.VerifyPeerCertificate != nil {
		if err := cfg.VerifyPeerCertificate(list, c.verifiedChains); err != nil {
			return c.sendAlert(AlertBadCertificate, err)
		}
	}
	return hs.verifyConnection()
}

// verifyConnection runs the VerifyConnection hook once the server is known:
// after its certificates (full handshake) or its ServerHello (resumption).
func (hs *clientHandshakeState) verifyConnection() error {
	c := hs.c
	if c.config.VerifyConnection == nil {
		return nil
	}
	if err := c.config.VerifyConnection(c.connectionStateLocked()); err != nil {
		hs.forgetSession()
		return c.sendAlert(verifyAlert(err), err)
	}
	return nil
}

func (hs *clientHandshakeState) establishKeys() error {
	c := hs.c
	kb := keyBlock(hs.suite, hs.mac, hs.hello.random, hs.serverHello.random)
	read, write, err := hs.suite.newCiphers(kb, true)
	clear(kb)
	if err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	c.in.nextCipher = read
	c.out.nextCipher = write
	return nil
}

func (hs *clientHandshakeState) sendFinished() error {
	c := hs.c
	if err := c.writeChangeCipherSpec(); err != nil {
		return err
	}
	verifyData := finishedData(hs.mac, true, hs.transcript.h)
	fin := &finishedMsg{verifyData: verifyData[:]}
	return c.writeHandshake(fin, &hs.transcript)
}

func (hs *clientHandshakeState) readFinished() error {
	c := hs.c
	if err := c.readChangeCipherSpec(); err != nil {
		return err
	}
	expected := finishedData(hs.mac, false, hs.transcript.h)
	msg, err := c.readHandshake(&hs.transcript)
	if err != nil {
		return err
	}
	fin, ok := msg.(*finishedMsg)
	if !ok {
		return c.unexpectedMessageError("Finished", msg)
	}
	if subtle.ConstantTimeCompare(fin.verifyData, expected[:]) != 1 {
		hs.forgetSession()
		return c.sendAlert(AlertDecryptError, errors.New("server Finished is wrong"))
	}
	return nil
}

func (hs *clientHandshakeState) saveSession() {
	c := hs.c
	cfg := c.config
	if cfg.ClientSessionCache == nil || cfg.SessionsDisabled || c.didResume || len(hs.serverHello.sessionID) == 0 {
		return
	}
	cfg.ClientSessionCache.Put(hs.sessionKey, &ClientSessionState{
		sessionID:          hs.serverHello.sessionID,
		cipherSuite:        hs.suite.id,
		masterSecret:       hs.masterSecret,
		serverCertificates: c.peerCertificates,
		verifiedChains:     c.verifiedChains,
		createdAt:          cfg.now(),
		clientCertificate:  hs.clientCert,
	})
}

func (hs *clientHandshakeState) forgetSession() {
	cfg := hs.c.config
	if cfg.ClientSessionCache != nil && hs.sessionKey != "" {
		cfg.ClientSessionCache.Put(hs.sessionKey, nil)
	}
}

// clientSessionCacheKey names a server in the client session cache: the
// server name when known, else the address.
func clientSessionCacheKey(addr net.Addr, cfg *Config) string {
	if cfg.ServerName != "" {
		return cfg.ServerName
	}
	if addr != nil {
		return addr.String()
	}
	return ""
}
