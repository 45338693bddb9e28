package tlcp

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/smx509"
)

// serverHandshakeState holds one server handshake in progress.
type serverHandshakeState struct {
	c            *Conn
	ctx          context.Context
	config       *Config
	clientHello  *clientHelloMsg
	hello        *serverHelloMsg
	suite        *cipherSuite
	cert         *Certificate
	session      *SessionState
	masterSecret []byte
	// mac is HMAC-SM3 keyed with the master secret, for the key schedule.
	mac        *hmacSM3
	transcript transcript
	// ecdheKey is the server's ephemeral key with the ECDHE suites.
	ecdheKey *ecdh.PrivateKey
	// certRequested is set when a CertificateRequest was sent.
	certRequested bool
	// clientCerts are the client's certificates, parsed. They are the
	// client's identity (c.peerCertificates) unless the policy is
	// NoClientCert, where they serve the ECDHE key exchange only.
	clientCerts []*smx509.Certificate
	// binding is what this handshake's session is bound to; set when
	// sessions are cached.
	binding [sessionBindingSize]byte

	// The messages the server sends live here, not each in an allocation
	// of its own (nothing of them outlives the handshake).
	helloMsg     serverHelloMsg
	serverRandom [32]byte
	certMsg      certificateMsg
	certList     [4][]byte
	ske          serverKeyExchangeMsg
	skeBody      [4 + 65 + 2 + 72]byte // ECDHE parameters, an SM2 signature
	finished     finishedMsg
	verifyData   [finishedVerifyLen]byte
}

func (c *Conn) serverHandshake(ctx context.Context) error {
	hs := &serverHandshakeState{c: c, ctx: ctx, config: c.config}
	hs.transcript.h = getTranscriptHash()
	// The key schedule's HMAC and the transcript's hash are needed no
	// longer than the handshake.
	defer func() {
		putHandshakeMAC(hs.mac)
		putTranscriptHash(hs.transcript.h)
	}()
	if err := hs.readClientHello(); err != nil {
		return err
	}
	if err := hs.processClientHello(); err != nil {
		return err
	}
	if hs.checkForResumption() {
		c.didResume = true
		if err := hs.verifyConnection(); err != nil {
			return err
		}
		if err := hs.doResumeHandshake(); err != nil {
			return err
		}
		if err := hs.establishKeys(); err != nil {
			return err
		}
		c.buffering = true
		if err := hs.sendFinished(); err != nil {
			return err
		}
		if err := c.flush(); err != nil {
			return err
		}
		if err := hs.readFinished(); err != nil {
			return err
		}
	} else {
		if err := hs.doFullHandshake(); err != nil {
			return err
		}
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
		// The client's Finished is verified: the session is good. It is
		// cached before the server's Finished leaves, so that a client
		// that reconnects as soon as it has it finds its session.
		hs.storeSession()
		if err := c.flush(); err != nil {
			hs.forgetSession()
			return err
		}
	}
	c.buffering = false
	c.isHandshakeComplete.Store(true)
	return nil
}

// readClientHello reads the ClientHello and applies GetConfigForClient.
func (hs *serverHandshakeState) readClientHello() error {
	c := hs.c
	msg, err := c.readHandshake(nil)
	if err != nil {
		return err
	}
	ch, ok := msg.(*clientHelloMsg)
	if !ok {
		return c.unexpectedMessageError("ClientHello", msg)
	}
	hs.clientHello = ch
	// Known from here on, so that a handshake refused for its server
	// name reports the name.
	c.serverName = ch.serverName
	if c.config.GetConfigForClient != nil {
		cfg, err := c.config.GetConfigForClient(hs.clientHelloInfo())
		if err != nil {
			alert := AlertInternalError
			if ae := (*AlertError)(nil); errors.As(err, &ae) && !ae.Remote {
				alert, err = ae.Alert, ae.Err
			}
			return c.sendAlert(alert, err)
		}
		if cfg != nil {
			hs.config = cfg
			c.config = cfg
		}
	}
	if err := hs.checkHelloVersion(); err != nil {
		return err
	}
	c.haveVers = true
	hs.transcript.Write(ch.raw)
	return nil
}

// checkHelloVersion accepts a TLCP hello, and a TLS hello that offers
// TLCP suites on a connection that takes them (ServerForTLSHello). A TLS
// hello with TLCP suites is otherwise refused with handshake_failure, the
// alert after which a GM browser retries in TLCP; anything else gets
// protocol_version.
func (hs *serverHandshakeState) checkHelloVersion() error {
	c, ch := hs.c, hs.clientHello
	if ch.vers == VersionTLCP {
		return nil
	}
	if ch.vers>>8 == 3 && ch.vers >= 0x0301 {
		gm := TLCPSuitesIn(ch.cipherSuites)
		switch {
		case len(gm) > 0 && c.acceptTLSHello:
			c.tlsHello = true
			return nil
		case len(gm) > 0:
			return c.sendAlert(AlertHandshakeFailure, fmt.Errorf("client sent a TLS %#04x ClientHello offering TLCP suites %s; refused so that it retries in TLCP", ch.vers, suiteList(gm)))
		}
	}
	return c.sendAlert(AlertProtocolVersion, fmt.Errorf("client offered version %#04x; this server speaks only TLCP 1.1 (0x0101)", ch.vers))
}

func (hs *serverHandshakeState) clientHelloInfo() *ClientHelloInfo {
	return &ClientHelloInfo{
		CipherSuites:    hs.clientHello.cipherSuites,
		ServerName:      hs.clientHello.serverName,
		SupportedProtos: hs.clientHello.alpnProtocols,
		HasExtensions:   hs.clientHello.hasExtensions,
		Conn:            hs.c.conn,
		ctx:             hs.ctx,
	}
}

func (hs *serverHandshakeState) processClientHello() error {
	c := hs.c
	ch := hs.clientHello
	if !slices.Contains(ch.compressionMethods, 0) {
		return c.sendAlert(AlertHandshakeFailure, errors.New("client does not offer null compression"))
	}
	c.serverName = ch.serverName

	hs.helloMsg = serverHelloMsg{vers: VersionTLCP, random: hs.serverRandom[:]}
	hs.hello = &hs.helloMsg
	if _, err := io.ReadFull(hs.config.rand(), hs.hello.random); err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	putUnixTime(hs.hello.random, hs.config.now())
	// A TLS client that asked for renegotiation_info gets it, empty, as
	// from a TLS 1.2 server (RFC 5746 §3.6): TLCP servers answering GM
	// browsers in TLCP send it too. TLCP clients do not ask for it.
	hs.hello.secureRenegotiation = c.tlsHello && ch.offersRenegotiationInfo()

	if len(ch.alpnProtocols) > 0 && len(hs.config.NextProtos) > 0 {
		proto, ok := mutualProtocol(hs.config.NextProtos, ch.alpnProtocols)
		if !ok {
			return c.sendAlert(AlertNoApplicationProtocol, fmt.Errorf("client offered ALPN %q, server supports %q", ch.alpnProtocols, hs.config.NextProtos))
		}
		hs.hello.alpnProtocol = proto
		c.negotiatedProtocol = proto
	}

	cert, err := hs.getCertificate()
	if err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	hs.cert = cert

	canECDHE := false
	if ka, ok := cert.EncKey.(KeyAgreementKey); ok && ka != nil {
		canECDHE = true
	}
	for _, id := range hs.config.cipherSuites() {
		s := cipherSuiteByID(id)
		if s == nil || !slices.Contains(ch.cipherSuites, id) || (s.ecdhe && !canECDHE) {
			continue
		}
		hs.suite = s
		break
	}
	if hs.suite == nil {
		return c.sendAlert(AlertHandshakeFailure, fmt.Errorf("no cipher suite in common (client offered %s)", suiteList(ch.cipherSuites)))
	}
	c.cipherSuite = hs.suite.id
	hs.hello.cipherSuite = hs.suite.id
	if hs.config.serverSessionCache() != nil {
		hs.binding = hs.config.sessionBinding(hs.cert)
	}
	return nil
}

func suiteList(ids []uint16) string {
	names := make([]string, 0, len(ids))
	for _, id := range ids {
		names = append(names, CipherSuiteName(id))
	}
	return fmt.Sprint(names)
}

// putUnixTime writes the GMT time into the first four bytes of a random,
// as GB/T 38636 specifies.
func putUnixTime(random []byte, t time.Time) {
	u := uint32(t.Unix())
	random[0], random[1], random[2], random[3] = byte(u>>24), byte(u>>16), byte(u>>8), byte(u)
}

func (hs *serverHandshakeState) getCertificate() (*Certificate, error) {
	cfg := hs.config
	if cfg.GetCertificate != nil {
		cert, err := cfg.GetCertificate(hs.clientHelloInfo())
		if err != nil {
			return nil, err
		}
		if cert != nil {
			return cert, checkServerCertificate(cert)
		}
	}
	if len(cfg.Certificates) == 0 {
		return nil, errNoCertificates
	}
	cert := &cfg.Certificates[0]
	return cert, checkServerCertificate(cert)
}

// checkServerCertificate makes sure a server identity is complete.
func checkServerCertificate(cert *Certificate) error {
	if len(cert.SignCertificate) == 0 || cert.SignKey == nil {
		return errors.New("tlcp: server certificate has no signing certificate or key")
	}
	if len(cert.EncCertificate) == 0 || cert.EncKey == nil {
		return errors.New("tlcp: server certificate has no encryption certificate or key")
	}
	return nil
}

// checkForResumption reports whether the client's session can be resumed.
// A session resumes only under what it was made under (its binding) and,
// like a full handshake, only if its client certificates satisfy the
// policy now.
func (hs *serverHandshakeState) checkForResumption() bool {
	c := hs.c
	cache := hs.config.serverSessionCache()
	if cache == nil || len(hs.clientHello.sessionID) == 0 {
		return false
	}
	s, ok := cache.Get(hs.clientHello.sessionID)
	if !ok || s == nil || s.Version != VersionTLCP || s.binding != hs.binding {
		return false
	}
	// The session's suite must still be enabled and offered.
	if s.CipherSuite != hs.suite.id {
		if !slices.Contains(hs.clientHello.cipherSuites, s.CipherSuite) || !slices.Contains(hs.config.cipherSuites(), s.CipherSuite) {
			return false
		}
	}
	suite := cipherSuiteByID(s.CipherSuite)
	if suite == nil || len(s.MasterSecret) != masterSecretLength {
		return false
	}
	certs, chains, ok := hs.resumedClientIdentity(s, suite)
	if !ok {
		return false
	}
	c.peerCertificates = certs
	c.verifiedChains = chains
	hs.session = s
	hs.suite = suite
	c.cipherSuite = suite.id
	hs.hello.cipherSuite = suite.id
	return true
}

// resumedClientIdentity checks a session's client certificates against the
// current policy, clock and ClientCAs, as crypto/tls does on resumption,
// and returns them with their verified chains.
func (hs *serverHandshakeState) resumedClientIdentity(s *SessionState, suite *cipherSuite) ([]*smx509.Certificate, [][]*smx509.Certificate, bool) {
	cfg := hs.config
	if len(s.PeerCertificates) == 0 {
		return nil, nil, !cfg.ClientAuth.requiresCert()
	}
	// Sessions with certificates that were never verified are not cached,
	// and none serves a policy that takes no certificate.
	if !s.verified || cfg.ClientAuth == NoClientCert {
		return nil, nil, false
	}
	certs, err := parseCertificates(s.PeerCertificates)
	if err != nil {
		return nil, nil, false
	}
	now := cfg.now()
	sign, enc, _ := clientCertRoles(certs, suite.ecdhe)
	if !validAt(sign, now) || (enc != nil && !validAt(enc, now)) {
		return nil, nil, false
	}
	if !cfg.ClientAuth.verifies() {
		return certs, nil, true
	}
	// The session's chains were verified when it was made, under the same
	// binding (and so the same policy and ClientCAs subjects); what may
	// have changed since is the clock and the CA certificates, which
	// chainValidAt checks. A session from a shared cache names its chains'
	// CAs by digest: one this process has not met yet (a replica that
	// never verified a certificate from that CA) is verified again, as is
	// a session without chains.
	var chains [][]*smx509.Certificate
	resolved := false
	for _, sc := range s.chains {
		chain := sc.chain(certs)
		if chain == nil {
			continue
		}
		resolved = true
		if chainValidAt(chain, cfg.ClientCAs, now) {
			chains = append(chains, chain)
		}
	}
	if !resolved {
		chains, err := cfg.verifyClientCertificates(certs, suite.ecdhe)
		if err != nil {
			return nil, nil, false
		}
		// Meet the CAs, so that the next session naming them resolves.
		sessionChains(chains, certs)
		return certs, chains, true
	}
	return certs, chains, len(chains) > 0
}

func (hs *serverHandshakeState) doResumeHandshake() error {
	c := hs.c
	hs.hello.sessionID = hs.clientHello.sessionID
	c.sessionID = hs.hello.sessionID
	hs.masterSecret = hs.session.MasterSecret
	hs.mac = getHandshakeMAC(hs.masterSecret)
	c.buffering = true
	return c.writeHandshake(hs.hello, &hs.transcript)
}

func (hs *serverHandshakeState) doFullHandshake() error {
	c := hs.c
	cfg := hs.config

	// Sessions with unverified client certificates are not cached (see
	// storeSession): under RequireAnyClientCert no session ID is issued.
	if cfg.serverSessionCache() != nil && cfg.ClientAuth != RequireAnyClientCert {
		hs.hello.sessionID = make([]byte, 32)
		if _, err := io.ReadFull(cfg.rand(), hs.hello.sessionID); err != nil {
			return c.sendAlert(AlertInternalError, err)
		}
		c.sessionID = hs.hello.sessionID
	}

	// ECDHE needs the client's encryption certificate, so those suites
	// always ask for client certificates.
	hs.certRequested = cfg.ClientAuth != NoClientCert || hs.suite.ecdhe
	hs.transcript.keepRaw = hs.certRequested
	if hs.transcript.keepRaw {
		hs.transcript.raw = append(hs.transcript.raw, hs.clientHello.raw...)
	}

	// A stapled OCSP response goes to a TLCP client that asked for it.
	// Not to a GM browser's TLS-form hello: nothing says those read a
	// CertificateStatus in TLCP.
	hs.hello.ocspStapling = hs.clientHello.ocspStapling && len(hs.cert.OCSPStaple) > 0 && !c.tlsHello

	c.buffering = true
	if err := c.writeHandshake(hs.hello, &hs.transcript); err != nil {
		return err
	}
	hs.certMsg = certificateMsg{certificates: hs.cert.wireList(hs.certList[:0], true)}
	if err := c.writeHandshake(&hs.certMsg, &hs.transcript); err != nil {
		return err
	}
	if hs.hello.ocspStapling {
		if err := c.writeHandshake(&certificateStatusMsg{response: hs.cert.OCSPStaple}, &hs.transcript); err != nil {
			return err
		}
	}
	if err := hs.serverKeyExchange(); err != nil {
		return err
	}
	if err := c.writeHandshake(&hs.ske, &hs.transcript); err != nil {
		return err
	}
	if hs.certRequested {
		req := &certificateRequestMsg{certificateTypes: []byte{certTypeRSASign, certTypeECDSASign}}
		if cfg.ClientCAs != nil {
			// ClientCAs is a pool the operator built, not the system
			// pool, so its subjects are complete.
			//lint:ignore SA1019 the pool is never a system pool here
			req.certificateAuthorities = cfg.ClientCAs.Subjects()
		}
		if err := c.writeHandshake(req, &hs.transcript); err != nil {
			return err
		}
	}
	if err := c.writeHandshake(&serverHelloDoneMsg{}, &hs.transcript); err != nil {
		return err
	}
	if err := c.flush(); err != nil {
		return err
	}
	c.buffering = false

	msg, err := c.readHandshake(&hs.transcript)
	if err != nil {
		return err
	}
	if hs.certRequested {
		certMsg, ok := msg.(*certificateMsg)
		if !ok {
			return c.unexpectedMessageError("Certificate", msg)
		}
		if err := hs.processClientCertificate(certMsg); err != nil {
			return err
		}
		if msg, err = c.readHandshake(&hs.transcript); err != nil {
			return err
		}
	}
	ckx, ok := msg.(*clientKeyExchangeMsg)
	if !ok {
		return c.unexpectedMessageError("ClientKeyExchange", msg)
	}
	preMasterSecret, err := hs.processClientKeyExchange(ckx)
	if err != nil {
		return err
	}
	hs.mac = getHandshakeMAC(nil)
	hs.masterSecret = masterFromPreMaster(hs.mac, preMasterSecret, hs.clientHello.random, hs.hello.random)
	clear(preMasterSecret)

	if len(hs.clientCerts) > 0 {
		// The signature covers everything up to, not including, itself.
		digest := hs.transcript.sum()
		raw := hs.transcript.raw
		msg, err := c.readHandshake(&hs.transcript)
		if err != nil {
			return err
		}
		cv, ok := msg.(*certificateVerifyMsg)
		if !ok {
			return c.unexpectedMessageError("CertificateVerify", msg)
		}
		pub, err := leafSM2Key(hs.clientCerts[0])
		if err != nil {
			return c.sendAlert(AlertUnsupportedCertificate, err)
		}
		if !verifyCertificateVerify(pub, digest, raw, cv.signature) {
			return c.sendAlert(AlertDecryptError, errors.New("client CertificateVerify signature is invalid"))
		}
	}
	hs.transcript.keepRaw = false
	hs.transcript.raw = nil
	return nil
}

// verifyCertificateVerify checks a client's CertificateVerify signature.
// Most clients sign SM3(handshake messages); GmSSL signs the messages
// themselves. Either form is accepted.
func verifyCertificateVerify(pub *ecdsa.PublicKey, digest, rawTranscript, sig []byte) bool {
	return verifyMessage(pub, digest, sig) || (rawTranscript != nil && verifyMessage(pub, rawTranscript, sig))
}

// serverKeyExchange builds the signed ServerKeyExchange in hs.ske.
func (hs *serverHandshakeState) serverKeyExchange() error {
	c := hs.c
	cfg := hs.config
	// What is signed is built in a flight buffer, kept for the next.
	scratch := flightBufs.Get().(*[]byte)
	defer flightBufs.Put(scratch)
	var params, signed []byte
	if hs.suite.ecdhe {
		key, err := ecdh.P256().GenerateKey(cfg.rand())
		if err != nil {
			return c.sendAlert(AlertInternalError, err)
		}
		hs.ecdheKey = key
		params = marshalECDHEParams(key.PublicKey().Bytes())
		signed = ecdheSignedParams((*scratch)[:0], hs.clientHello.random, hs.hello.random, params)
	} else {
		signed = eccSignedParams((*scratch)[:0], hs.clientHello.random, hs.hello.random, hs.cert.EncCertificate[0])
	}
	if cap(signed) <= 64<<10 {
		*scratch = signed[:0]
	}
	sig, err := signMessage(hs.cert.SignKey, cfg.rand(), signed)
	if err != nil {
		return c.sendAlert(AlertInternalError, fmt.Errorf("signing ServerKeyExchange: %w", err))
	}
	hs.ske = serverKeyExchangeMsg{key: marshalServerKeyExchange(hs.skeBody[:0], params, sig)}
	return nil
}

// processClientCertificate checks the client's certificates against the
// ClientAuth policy.
func (hs *serverHandshakeState) processClientCertificate(msg *certificateMsg) error {
	c := hs.c
	cfg := hs.config
	if len(msg.certificates) == 0 {
		if hs.suite.ecdhe {
			return c.sendAlert(AlertHandshakeFailure, errors.New("client sent no certificate, but ECDHE suites need the client's signing and encryption certificates"))
		}
		if cfg.ClientAuth.requiresCert() {
			return c.sendAlert(AlertHandshakeFailure, errors.New("client did not send the certificate this server requires"))
		}
		return nil
	}
	if hs.suite.ecdhe && len(msg.certificates) < 2 {
		return c.sendAlert(AlertHandshakeFailure, errors.New("client sent no encryption certificate, which ECDHE suites need"))
	}
	certs, err := parseCertificates(msg.certificates)
	if err != nil {
		return c.sendAlert(AlertBadCertificate, fmt.Errorf("client %v", err))
	}
	hs.clientCerts = certs
	sign, enc, _ := clientCertRoles(certs, hs.suite.ecdhe)
	// The client's encryption key never receives a pre-master secret.
	if err := checkKeyUsages(sign, enc, false); err != nil {
		return c.sendAlert(AlertUnsupportedCertificate, fmt.Errorf("client %v", err))
	}
	if cfg.ClientAuth == NoClientCert {
		// The ECDHE suites made us ask for these; they are not verified,
		// so they are not the client's identity.
		return nil
	}
	c.peerCertificates = certs
	if cfg.ClientAuth.verifies() {
		chains, err := cfg.verifyClientCertificates(certs, hs.suite.ecdhe)
		if err != nil {
			return c.sendAlert(certificateAlert(err), fmt.Errorf("client certificate: %w", err))
		}
		c.verifiedChains = chains
	}
	if cfg.VerifyPeerCertificate != nil {
		if err := cfg.VerifyPeerCertificate(msg.certificates, c.verifiedChains); err != nil {
			return c.sendAlert(AlertBadCertificate, err)
		}
	}
	return nil
}

// clientCertRoles splits a client's certificate list: the signing
// certificate, the encryption certificate (nil without one) and the
// intermediates. With the ECC suites the client may send its signing
// certificate alone or with its encryption certificate: the second
// certificate is an encryption certificate only if its usages say so.
func clientCertRoles(certs []*smx509.Certificate, ecdhe bool) (sign, enc *smx509.Certificate, intermediates []*smx509.Certificate) {
	sign, intermediates = certs[0], certs[1:]
	if len(certs) > 1 && (ecdhe || isEncCertificate(certs[1])) {
		enc, intermediates = certs[1], certs[2:]
	}
	return sign, enc, intermediates
}

// verifyClientCertificates verifies a client's certificates under c.
func (c *Config) verifyClientCertificates(certs []*smx509.Certificate, ecdhe bool) ([][]*smx509.Certificate, error) {
	sign, enc, intermediates := clientCertRoles(certs, ecdhe)
	return verifyPeerChains(sign, enc, intermediates, c.ClientCAs, "", c.now(), c.clientCertUsages())
}

// isEncCertificate reports whether a certificate's key usages mark it as
// an encryption certificate rather than a CA.
func isEncCertificate(c *smx509.Certificate) bool {
	return !c.IsCA && c.KeyUsage&encKeyUsages != 0
}

func (hs *serverHandshakeState) processClientKeyExchange(ckx *clientKeyExchangeMsg) ([]byte, error) {
	c := hs.c
	if hs.suite.ecdhe {
		point, ok := parseECDHEClientKeyExchange(ckx.key)
		if !ok {
			return nil, c.sendAlert(AlertDecodeError, errors.New("malformed ECDHE ClientKeyExchange"))
		}
		peerEnc, err := leafSM2Key(hs.clientCerts[1])
		if err != nil {
			return nil, c.sendAlert(AlertUnsupportedCertificate, fmt.Errorf("client encryption certificate: %w", err))
		}
		ownEnc, err := encPublicKey(hs.cert)
		if err != nil {
			return nil, c.sendAlert(AlertInternalError, fmt.Errorf("server encryption certificate: %w", err))
		}
		pms, err := sm2KeyExchange(true, hs.cert.EncKey.(KeyAgreementKey), ownEnc, hs.ecdheKey, peerEnc, point)
		if err != nil {
			return nil, c.sendAlert(AlertIllegalParameter, fmt.Errorf("SM2 key exchange: %w", err))
		}
		return pms, nil
	}
	ct, ok := parseECCClientKeyExchange(ckx.key)
	if !ok {
		return nil, c.sendAlert(AlertDecodeError, errors.New("malformed ECC ClientKeyExchange"))
	}
	dec, ok := hs.cert.EncKey.(crypto.Decrypter)
	if !ok {
		return nil, c.sendAlert(AlertInternalError, fmt.Errorf("encryption key of type %T is not a crypto.Decrypter", hs.cert.EncKey))
	}
	pms, err := dec.Decrypt(hs.config.rand(), ct, nil)
	if err != nil {
		return nil, c.sendAlert(AlertDecryptError, fmt.Errorf("cannot decrypt the pre-master secret: %w", err))
	}
	if len(pms) != preMasterSecretLength {
		return nil, c.sendAlert(AlertDecryptError, fmt.Errorf("pre-master secret of %d bytes, want %d", len(pms), preMasterSecretLength))
	}
	return pms, nil
}

func (hs *serverHandshakeState) establishKeys() error {
	c := hs.c
	kb := keyBlock(hs.suite, hs.mac, hs.clientHello.random, hs.hello.random)
	read, write, err := hs.suite.newCiphers(kb, false)
	clear(kb)
	if err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	c.in.nextCipher = read
	c.out.nextCipher = write
	return nil
}

func (hs *serverHandshakeState) readFinished() error {
	c := hs.c
	if err := c.readChangeCipherSpec(); err != nil {
		return err
	}
	expected := finishedData(hs.mac, true, hs.transcript.h)
	msg, err := c.readHandshake(&hs.transcript)
	if err != nil {
		return err
	}
	fin, ok := msg.(*finishedMsg)
	if !ok {
		return c.unexpectedMessageError("Finished", msg)
	}
	if subtle.ConstantTimeCompare(fin.verifyData, expected[:]) != 1 {
		return c.sendAlert(AlertDecryptError, errors.New("client Finished is wrong"))
	}
	return nil
}

func (hs *serverHandshakeState) sendFinished() error {
	c := hs.c
	if err := c.writeChangeCipherSpec(); err != nil {
		return err
	}
	hs.verifyData = finishedData(hs.mac, false, hs.transcript.h)
	hs.finished = finishedMsg{verifyData: hs.verifyData[:]}
	return c.writeHandshake(&hs.finished, &hs.transcript)
}

// storeSession caches the session of a full handshake. A session whose
// client certificates were not verified is not cached: anyone can make up
// certificates, and a cache of them is memory an attacker fills.
func (hs *serverHandshakeState) storeSession() {
	c := hs.c
	cache := hs.config.serverSessionCache()
	if cache == nil || len(hs.hello.sessionID) == 0 {
		return
	}
	s := &SessionState{
		Version:      VersionTLCP,
		CipherSuite:  hs.suite.id,
		MasterSecret: hs.masterSecret,
		CreatedAt:    hs.config.now(),
		ServerName:   c.serverName,
		binding:      hs.binding,
	}
	if certs := c.peerCertificates; len(certs) > 0 {
		if len(c.verifiedChains) == 0 {
			return
		}
		// Each Raw is a buffer of its own (see parseCertificate).
		s.PeerCertificates = make([][]byte, len(certs))
		for i, cert := range certs {
			s.PeerCertificates[i] = cert.Raw
		}
		if !sessionCertsFit(s.PeerCertificates) {
			return
		}
		s.verified = true
		s.chains = sessionChains(c.verifiedChains, certs)
	}
	cache.Put(hs.hello.sessionID, s)
}

func (hs *serverHandshakeState) verifyConnection() error {
	c := hs.c
	if hs.config.VerifyConnection == nil {
		return nil
	}
	if err := hs.config.VerifyConnection(c.connectionStateLocked()); err != nil {
		hs.forgetSession()
		return c.sendAlert(verifyAlert(err), err)
	}
	return nil
}

// forgetSession drops the session of a handshake that failed late: the
// one it made, or the one it was resuming (whose ID is not in the
// ServerHello yet when VerifyConnection rejects it).
func (hs *serverHandshakeState) forgetSession() {
	id := hs.hello.sessionID
	if hs.session != nil {
		id = hs.clientHello.sessionID
	}
	if cache := hs.config.serverSessionCache(); cache != nil && len(id) > 0 {
		cache.Delete(id)
	}
}
