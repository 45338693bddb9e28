package tls13

import (
	"context"
	"crypto/hmac"
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
	"time"

	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/smx509"
	gmtls13 "github.com/emmansun/gmsm/tls13"
)

// serverHandshakeState walks the server side of a handshake (RFC 8446
// §2): ClientHello (and perhaps HelloRetryRequest and a second
// ClientHello), then the server's flight, then the client's.
type serverHandshakeState struct {
	c           *Conn
	ctx         context.Context
	config      *Config
	clientHello *clientHelloMsg
	hello       *serverHelloMsg
	suite       *cipherSuite
	group       CurveID
	clientShare []byte
	cert        *Certificate
	binding     [32]byte
	transcript  hash.Hash

	// firstHello and retryRequest are kept after a HelloRetryRequest,
	// for the PSK binder's transcript.
	firstHello   []byte
	retryRequest []byte

	session          *SessionState // the resumed session, if any
	selectedIdentity uint16
	earlySecret      []byte
	handshakeSecret  []byte
	clientHSSecret   []byte
	serverHSSecret   []byte
	masterSecret     []byte
	clientAppSecret  []byte
	requestedCert    bool
	compatCCSSent    bool
}

func (c *Conn) serverHandshake(ctx context.Context) error {
	hs := &serverHandshakeState{c: c, ctx: ctx, config: c.config, transcript: sm3.New()}
	if err := hs.readClientHello(); err != nil {
		return err
	}
	if err := hs.processClientHello(); err != nil {
		return err
	}
	if err := hs.checkForResumption(); err != nil {
		return err
	}
	if err := hs.pickCertificate(); err != nil {
		return err
	}
	if err := hs.sendServerParameters(); err != nil {
		return err
	}
	if err := hs.sendServerCertificate(); err != nil {
		return err
	}
	if err := hs.sendServerFinished(); err != nil {
		return err
	}
	if err := hs.readClientCertificate(); err != nil {
		return err
	}
	if err := hs.readClientFinished(); err != nil {
		return err
	}
	if err := hs.verifyConnection(); err != nil {
		return err
	}
	c.isHandshakeComplete.Store(true)
	hs.sendSessionTicket()
	return nil
}

func (hs *serverHandshakeState) readClientHello() error {
	c := hs.c
	msg, err := c.readHandshakeBytes()
	if err != nil {
		return err
	}
	if msg[0] != typeClientHello {
		return c.sendAlert(AlertUnexpectedMessage, fmt.Errorf("got %s, want ClientHello", messageName(msg[0])))
	}
	ch := new(clientHelloMsg)
	if !ch.unmarshal(msg) {
		return c.sendAlert(AlertDecodeError, errors.New("malformed ClientHello"))
	}
	hs.clientHello = ch
	if c.config.GetConfigForClient != nil {
		cfg, err := c.config.GetConfigForClient(hs.clientHelloInfo())
		if err != nil {
			var ae *AlertError
			if errors.As(err, &ae) {
				return c.sendAlert(ae.Alert, err)
			}
			return c.sendAlert(AlertInternalError, err)
		}
		if cfg != nil {
			hs.config = cfg
			c.config = cfg
		}
	}
	return nil
}

func (hs *serverHandshakeState) clientHelloInfo() *ClientHelloInfo {
	ch := hs.clientHello
	return &ClientHelloInfo{
		CipherSuites:      ch.cipherSuites,
		ServerName:        ch.serverName,
		SupportedProtos:   ch.alpnProtocols,
		SupportedGroups:   ch.supportedGroups,
		SignatureSchemes:  ch.signatureAlgorithms,
		SupportedVersions: ch.supportedVersions,
		Conn:              hs.c.conn,
		ctx:               hs.ctx,
	}
}

// processClientHello checks the hello is a TLS 1.3 ShangMi one, picks the
// suite and group, and asks for another key share if needed.
func (hs *serverHandshakeState) processClientHello() error {
	c := hs.c
	ch := hs.clientHello
	if !slices.Contains(ch.supportedVersions, VersionTLS13) {
		return c.sendAlert(AlertProtocolVersion, errors.New("client does not offer TLS 1.3"))
	}
	if ch.vers != legacyVersion {
		return c.sendAlert(AlertIllegalParameter, fmt.Errorf("ClientHello legacy_version %#04x", ch.vers))
	}
	if len(ch.compressionMethods) != 1 || ch.compressionMethods[0] != 0 {
		return c.sendAlert(AlertIllegalParameter, errors.New("ClientHello offers compression"))
	}
	for _, id := range hs.config.cipherSuites() {
		if slices.Contains(ch.cipherSuites, id) {
			hs.suite = cipherSuiteByID(id)
			if hs.suite != nil {
				break
			}
		}
	}
	if hs.suite == nil {
		return c.sendAlert(AlertHandshakeFailure, errors.New("client offers no ShangMi cipher suite"))
	}
	c.cipherSuite = hs.suite.id
	if !ch.hasSigAlgs {
		return c.sendAlert(AlertMissingExtension, errors.New("ClientHello without signature_algorithms"))
	}
	if !slices.Contains(ch.signatureAlgorithms, SM2SigSM3) {
		return c.sendAlert(AlertHandshakeFailure, errors.New("client does not offer sm2sig_sm3"))
	}
	if !ch.hasGroups || !ch.hasKeyShare {
		// psk_ke (a PSK without key exchange) is not served.
		return c.sendAlert(AlertMissingExtension, errors.New("ClientHello without supported_groups or key_share"))
	}
	if ch.serverName != "" {
		c.serverName = ch.serverName
	}
	if ch.earlyData {
		// 0-RTT is off: early data is never accepted. Since no ticket
		// allows it, a client that sends it anyway is broken.
		return c.sendAlert(AlertUnsupportedExtension, errors.New("client sends early data, which this server never accepts"))
	}

	// The group: the server's most preferred group the client sent a
	// share for, else (one more round trip) its most preferred group the
	// client supports.
	var retryGroup CurveID
	for _, g := range hs.config.curvePreferences() {
		if !usableGroup(g) || !slices.Contains(ch.supportedGroups, g) {
			continue
		}
		if retryGroup == 0 {
			retryGroup = g
		}
		if i := slices.IndexFunc(ch.keyShares, func(ks keyShare) bool { return ks.group == g }); i >= 0 {
			hs.group = g
			hs.clientShare = ch.keyShares[i].data
			break
		}
	}
	if hs.group == 0 {
		if retryGroup == 0 {
			return c.sendAlert(AlertHandshakeFailure, errors.New("client supports neither curveSM2 nor curveSM2MLKEM768"))
		}
		if err := hs.doHelloRetryRequest(retryGroup); err != nil {
			return err
		}
	}
	c.group = hs.group
	hs.transcript.Write(hs.clientHello.raw)
	return nil
}

// helloRetryRequestRandom marks a ServerHello as a HelloRetryRequest (RFC
// 8446 §4.1.3).
var helloRetryRequestRandom = []byte{
	0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11,
	0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
	0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E,
	0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C,
}

func isHelloRetryRequest(random []byte) bool {
	return hmac.Equal(random, helloRetryRequestRandom)
}

// messageHashOf replaces the first ClientHello in the transcript after a
// HelloRetryRequest (RFC 8446 §4.4.1).
func messageHashOf(clientHello []byte) hash.Hash {
	sum := sm3.Sum(clientHello)
	h := sm3.New()
	h.Write([]byte{typeMessageHash, 0, 0, hashLen})
	h.Write(sum[:])
	return h
}

func (hs *serverHandshakeState) doHelloRetryRequest(group CurveID) error {
	c := hs.c
	first := hs.clientHello
	hs.transcript = messageHashOf(first.raw)
	hrr := &serverHelloMsg{
		vers:             legacyVersion,
		random:           helloRetryRequestRandom,
		sessionID:        first.sessionID,
		cipherSuite:      hs.suite.id,
		supportedVersion: VersionTLS13,
		selectedGroup:    group,
	}
	hs.firstHello = first.raw
	hs.retryRequest = hrr.marshal()
	if err := c.writeHandshake(hs.retryRequest, hs.transcript); err != nil {
		return err
	}
	if len(first.sessionID) > 0 {
		if err := c.writeChangeCipherSpec(); err != nil {
			return err
		}
		hs.compatCCSSent = true
	}
	c.didHRR = true

	msg, err := c.readHandshakeBytes()
	if err != nil {
		return err
	}
	if msg[0] != typeClientHello {
		return c.sendAlert(AlertUnexpectedMessage, fmt.Errorf("got %s, want a second ClientHello", messageName(msg[0])))
	}
	ch := new(clientHelloMsg)
	if !ch.unmarshal(msg) {
		return c.sendAlert(AlertDecodeError, errors.New("malformed second ClientHello"))
	}
	if len(ch.keyShares) != 1 || ch.keyShares[0].group != group {
		return c.sendAlert(AlertIllegalParameter, errors.New("second ClientHello without the one key share asked for"))
	}
	if ch.earlyData {
		return c.sendAlert(AlertIllegalParameter, errors.New("second ClientHello offers early data"))
	}
	// The rest must be what the first hello said (RFC 8446 §4.1.2).
	if !slices.Equal(ch.cipherSuites, first.cipherSuites) || !slices.Equal(ch.supportedVersions, first.supportedVersions) ||
		!slices.Equal(ch.supportedGroups, first.supportedGroups) || !slices.Equal(ch.signatureAlgorithms, first.signatureAlgorithms) ||
		!slices.Equal(ch.alpnProtocols, first.alpnProtocols) || ch.serverName != first.serverName ||
		!slices.Equal(ch.sessionID, first.sessionID) || ch.vers != first.vers {
		return c.sendAlert(AlertIllegalParameter, errors.New("second ClientHello differs from the first"))
	}
	hs.clientHello = ch
	hs.group = group
	hs.clientShare = ch.keyShares[0].data
	return nil
}

// checkForResumption looks for a ticket the client offers that this
// server can resume: made under the same binding, alive, and whose client
// certificates satisfy the policy now. A ticket that fails any of these
// costs a full handshake; a ticket whose binder fails ends the handshake.
func (hs *serverHandshakeState) checkForResumption() error {
	c := hs.c
	cfg := hs.config
	ch := hs.clientHello
	if cfg.SessionTicketsDisabled || len(ch.pskIdentities) == 0 || !slices.Contains(ch.pskModes, pskModeDHE) {
		return nil
	}
	now := cfg.now()
	var binding *[32]byte
	for i, id := range ch.pskIdentities {
		st := cfg.openTicket(id.label)
		if st == nil || cipherSuiteByID(st.CipherSuite) == nil || len(st.PSK) != hashLen {
			continue
		}
		// A session lives as long as it was given, but no longer than
		// the Config allows now (a shortened lifetime applies to
		// tickets already out).
		lifetime := min(st.Lifetime, cfg.sessionLifetime())
		if now.Before(st.CreatedAt.Add(-time.Minute)) || now.After(st.CreatedAt.Add(lifetime)) {
			continue
		}
		// Certificate bound: resolved once the certificate is known.
		cert, err := hs.certificate()
		if err != nil {
			return err
		}
		if binding == nil {
			b := cfg.sessionBinding(cert)
			binding = &b
		}
		if st.Binding != *binding {
			continue
		}
		if !hs.resumedClientIdentity(st, now) {
			continue
		}
		// The binder proves the client holds the PSK (RFC 8446 §4.2.11.2).
		early := earlySecret(st.PSK)
		truncated := ch.raw[:len(ch.raw)-ch.bindersLen()]
		th := hs.transcriptBefore()
		th.Write(truncated)
		want := finishedMAC(binderKey(early), th)
		if !hmac.Equal(want, ch.pskBinders[i]) {
			return c.sendAlert(AlertDecryptError, errors.New("PSK binder does not verify"))
		}
		hs.session = st
		hs.earlySecret = early
		hs.selectedIdentity = uint16(i)
		c.didResume = true
		return nil
	}
	return nil
}

// transcriptBefore is the transcript before the current ClientHello.
func (hs *serverHandshakeState) transcriptBefore() hash.Hash {
	if hs.c.didHRR {
		// message_hash(CH1) || HelloRetryRequest: recompute from the
		// bytes kept in the retry.
		h := messageHashOf(hs.firstHello)
		h.Write(hs.retryRequest)
		return h
	}
	return sm3.New()
}

// resumedClientIdentity checks a session's client certificates against
// the current policy, clock and ClientCAs, as tlcp does on resumption,
// and sets them as the peer's.
func (hs *serverHandshakeState) resumedClientIdentity(st *SessionState, now time.Time) bool {
	cfg := hs.config
	c := hs.c
	if len(st.PeerCertificates) == 0 {
		// Without a certificate, a session serves a policy that does not
		// require one; one that does runs a full handshake and asks.
		return !requiresCert(cfg.ClientAuth)
	}
	if cfg.ClientAuth == NoClientCert {
		return false
	}
	certs, err := parseCertificates(st.PeerCertificates)
	if err != nil {
		return false
	}
	for _, cert := range certs {
		if !validAt(cert, now) {
			return false
		}
	}
	var chains [][]*smx509.Certificate
	if verifiesCert(cfg.ClientAuth) {
		if !st.Verified {
			return false
		}
		chains, err = verifyChain(certs, cfg.ClientCAs, "", now, cfg.clientCertUsages())
		if err != nil {
			return false
		}
	}
	c.peerCertificates = certs
	c.verifiedChains = chains
	return true
}

// certificate returns the server identity for this hello.
func (hs *serverHandshakeState) certificate() (*Certificate, error) {
	if hs.cert != nil {
		return hs.cert, nil
	}
	c := hs.c
	cfg := hs.config
	var cert *Certificate
	if cfg.GetCertificate != nil {
		var err error
		cert, err = cfg.GetCertificate(hs.clientHelloInfo())
		if err != nil {
			var ae *AlertError
			if errors.As(err, &ae) {
				return nil, c.sendAlert(ae.Alert, err)
			}
			return nil, c.sendAlert(AlertInternalError, err)
		}
	}
	if cert == nil {
		if len(cfg.Certificates) == 0 {
			return nil, c.sendAlert(AlertInternalError, errNoCertificates)
		}
		cert = &cfg.Certificates[0]
	}
	if len(cert.Certificate) == 0 || cert.PrivateKey == nil {
		return nil, c.sendAlert(AlertInternalError, errors.New("server certificate has no chain or key"))
	}
	// An identity that cannot make sm2sig_sm3 signatures (an RSA or
	// ECDSA certificate handed over by mistake) fails here, by name.
	leaf, err := cert.leaf()
	if err != nil {
		return nil, c.sendAlert(AlertInternalError, fmt.Errorf("server certificate: %w", err))
	}
	if _, err := sm2PublicKey(leaf); err != nil {
		return nil, c.sendAlert(AlertInternalError, fmt.Errorf("server %w", err))
	}
	hs.cert = cert
	return cert, nil
}

func (hs *serverHandshakeState) pickCertificate() error {
	cert, err := hs.certificate()
	if err != nil {
		return err
	}
	hs.binding = hs.config.sessionBinding(cert)
	return nil
}

// sendServerParameters sends ServerHello and EncryptedExtensions.
func (hs *serverHandshakeState) sendServerParameters() error {
	c := hs.c
	ch := hs.clientHello
	kex, err := gmtls13.NewKeyExchange(gmtls13.CurveID(hs.group))
	if err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	shared, serverShare, err := kex.ServerSharedSecret(hs.config.rand(), hs.clientShare)
	if err != nil {
		return c.sendAlert(AlertIllegalParameter, fmt.Errorf("client %s key share: %w", hs.group, err))
	}
	hs.hello = &serverHelloMsg{
		vers:             legacyVersion,
		random:           make([]byte, 32),
		sessionID:        ch.sessionID,
		cipherSuite:      hs.suite.id,
		supportedVersion: VersionTLS13,
		serverShare:      keyShare{group: hs.group, data: serverShare.Data},
	}
	if _, err := io.ReadFull(hs.config.rand(), hs.hello.random); err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	if hs.session != nil {
		hs.hello.hasPSK = true
		hs.hello.selectedIdentity = hs.selectedIdentity
	}
	c.out.Lock()
	c.buffering = true
	c.out.Unlock()
	if err := c.writeHandshake(hs.hello.marshal(), hs.transcript); err != nil {
		return err
	}
	if len(ch.sessionID) > 0 && !hs.compatCCSSent {
		if err := c.writeChangeCipherSpec(); err != nil {
			return err
		}
	}
	if hs.earlySecret == nil {
		hs.earlySecret = earlySecret(nil)
	}
	hs.handshakeSecret = handshakeSecret(hs.earlySecret, shared)
	clear(shared)
	hs.clientHSSecret = deriveSecret(hs.handshakeSecret, labelClientHandshake, hs.transcript)
	serverSecret := deriveSecret(hs.handshakeSecret, labelServerHandshake, hs.transcript)
	if err := c.setWriteSecret(hs.suite, serverSecret); err != nil {
		return err
	}
	if err := c.setReadSecret(hs.suite, hs.clientHSSecret); err != nil {
		return err
	}
	hs.serverHSSecret = serverSecret

	ee := &encryptedExtensionsMsg{serverNameAck: ch.serverName != "" && hs.session == nil}
	if len(ch.alpnProtocols) > 0 && len(hs.config.NextProtos) > 0 {
		proto, ok := mutualProtocol(hs.config.NextProtos, ch.alpnProtocols)
		if !ok {
			return c.sendAlert(AlertNoApplicationProtocol, fmt.Errorf("client offered ALPN %q, none of which this server speaks", ch.alpnProtocols))
		}
		ee.alpnProtocol = proto
		c.negotiatedProtocol = proto
	}
	return c.writeHandshake(ee.marshal(), hs.transcript)
}

// sendServerCertificate sends CertificateRequest, Certificate and
// CertificateVerify on a full handshake.
func (hs *serverHandshakeState) sendServerCertificate() error {
	if hs.session != nil {
		return nil
	}
	c := hs.c
	cfg := hs.config
	if cfg.ClientAuth != NoClientCert {
		hs.requestedCert = true
		req := &certificateRequestMsg{signatureAlgorithms: []uint16{SM2SigSM3}}
		if cfg.ClientCAs != nil {
			//lint:ignore SA1019 the subjects of the pool the caller built
			req.certificateAuthorities = cfg.ClientCAs.Subjects()
		}
		if err := c.writeHandshake(req.marshal(), hs.transcript); err != nil {
			return err
		}
	}
	cm := &certificateMsg{certificates: hs.cert.Certificate}
	if err := c.writeHandshake(cm.marshal(), hs.transcript); err != nil {
		return err
	}
	cv, err := cfg.signCertificateVerify(hs.cert, serverSignatureContext, hs.transcript)
	if err != nil {
		return c.sendAlert(AlertInternalError, err)
	}
	return c.writeHandshake(cv.marshal(), hs.transcript)
}

// sendServerFinished sends Finished, flushes the flight and derives the
// application secrets.
func (hs *serverHandshakeState) sendServerFinished() error {
	c := hs.c
	fin := &finishedMsg{verifyData: finishedMAC(hs.serverHSSecret, hs.transcript)}
	if err := c.writeHandshake(fin.marshal(), hs.transcript); err != nil {
		return err
	}
	if err := c.flushFlight(); err != nil {
		return err
	}
	hs.masterSecret = masterSecret(hs.handshakeSecret)
	hs.clientAppSecret = deriveSecret(hs.masterSecret, labelClientApplication, hs.transcript)
	serverApp := deriveSecret(hs.masterSecret, labelServerApplication, hs.transcript)
	return c.setWriteSecret(hs.suite, serverApp)
}

// readClientCertificate reads the client's Certificate and
// CertificateVerify when they were asked for, and applies ClientAuth.
func (hs *serverHandshakeState) readClientCertificate() error {
	if !hs.requestedCert {
		return nil
	}
	c := hs.c
	cfg := hs.config
	msg, err := c.readHandshake(typeCertificate, hs.transcript)
	if err != nil {
		return err
	}
	var cm certificateMsg
	if !cm.unmarshal(msg) || len(cm.context) != 0 {
		return c.sendAlert(AlertDecodeError, errors.New("malformed client Certificate"))
	}
	if len(cm.certificates) == 0 {
		if requiresCert(cfg.ClientAuth) {
			return c.sendAlert(AlertCertificateRequired, errors.New("client sent no certificate, which this server requires"))
		}
		return nil
	}
	certs, err := parseCertificates(cm.certificates)
	if err != nil {
		return c.sendAlert(AlertBadCertificate, fmt.Errorf("client %v", err))
	}
	if err := checkLeafUsage(certs[0]); err != nil {
		return c.sendAlert(AlertUnsupportedCertificate, fmt.Errorf("client %v", err))
	}
	var chains [][]*smx509.Certificate
	if verifiesCert(cfg.ClientAuth) {
		chains, err = verifyChain(certs, cfg.ClientCAs, "", cfg.now(), cfg.clientCertUsages())
		if err != nil {
			return c.sendAlert(certificateAlert(err), fmt.Errorf("client certificate: %w", err))
		}
	}
	if cfg.VerifyPeerCertificate != nil {
		if err := cfg.VerifyPeerCertificate(cm.certificates, chains); err != nil {
			return c.sendAlert(AlertBadCertificate, err)
		}
	}
	// The CertificateVerify signs the transcript up to the Certificate.
	msg, err = c.readHandshakeBytes()
	if err != nil {
		return err
	}
	if msg[0] != typeCertificateVerify {
		return c.sendAlert(AlertUnexpectedMessage, fmt.Errorf("got %s, want CertificateVerify", messageName(msg[0])))
	}
	var cv certificateVerifyMsg
	if !cv.unmarshal(msg) {
		return c.sendAlert(AlertDecodeError, errors.New("malformed client CertificateVerify"))
	}
	if err := cfg.verifyCertificateVerify(certs[0], &cv, clientSignatureContext, hs.transcript); err != nil {
		return c.sendAlert(AlertDecryptError, fmt.Errorf("client %w", err))
	}
	hs.transcript.Write(msg)
	c.peerCertificates = certs
	c.verifiedChains = chains
	return nil
}

// readClientFinished checks the client's Finished and switches reading to
// application keys.
func (hs *serverHandshakeState) readClientFinished() error {
	c := hs.c
	want := finishedMAC(hs.clientHSSecret, hs.transcript)
	msg, err := c.readHandshake(typeFinished, hs.transcript)
	if err != nil {
		return err
	}
	var fin finishedMsg
	if !fin.unmarshal(msg) {
		return c.sendAlert(AlertDecodeError, errors.New("malformed client Finished"))
	}
	if !hmac.Equal(want, fin.verifyData) {
		return c.sendAlert(AlertDecryptError, errors.New("client Finished does not verify"))
	}
	if err := c.setReadSecret(hs.suite, hs.clientAppSecret); err != nil {
		return err
	}
	c.resumptionSecret = deriveSecret(hs.masterSecret, labelResumptionMaster, hs.transcript)
	return nil
}

func (hs *serverHandshakeState) verifyConnection() error {
	c := hs.c
	if hs.config.VerifyConnection != nil {
		if err := hs.config.VerifyConnection(c.connectionStateLocked()); err != nil {
			return c.sendAlert(verifyAlert(err), err)
		}
	}
	return nil
}

// sendSessionTicket issues one ticket after the handshake. A session whose
// client certificates were not verified is kept too: its certificates are
// checked again, under the policy of the moment, when it resumes. A
// ticket that cannot be made costs only the resumption.
func (hs *serverHandshakeState) sendSessionTicket() {
	c := hs.c
	cfg := hs.config
	if cfg.SessionTicketsDisabled || !slices.Contains(hs.clientHello.pskModes, pskModeDHE) {
		return
	}
	var certs [][]byte
	n := 0
	for _, cert := range c.peerCertificates {
		certs = append(certs, cert.Raw)
		n += len(cert.Raw)
	}
	if len(certs) > maxSessionCerts || n > maxSessionCertBytes {
		return
	}
	var nonce [8]byte
	var ageAdd [4]byte
	if _, err := io.ReadFull(cfg.rand(), ageAdd[:]); err != nil {
		return
	}
	now := cfg.now()
	st := &SessionState{
		CipherSuite:      hs.suite.id,
		PSK:              resumptionPSK(c.resumptionSecret, nonce[:]),
		CreatedAt:        now,
		Lifetime:         cfg.sessionLifetime(),
		PeerCertificates: certs,
		ServerName:       c.serverName,
		ALPN:             c.negotiatedProtocol,
		Verified:         len(c.verifiedChains) > 0,
		Binding:          hs.binding,
	}
	if hs.session != nil {
		// A resumed session keeps its age: resumption does not extend it.
		st.CreatedAt = hs.session.CreatedAt
		st.Lifetime = hs.session.Lifetime
	}
	label, err := cfg.issueTicket(st)
	if err != nil {
		return
	}
	remaining := st.CreatedAt.Add(st.Lifetime).Sub(now)
	if remaining < time.Second {
		return
	}
	m := &newSessionTicketMsg{
		lifetime: uint32(remaining / time.Second),
		ageAdd:   binary.BigEndian.Uint32(ageAdd[:]),
		nonce:    nonce[:],
		label:    label,
	}
	c.out.Lock()
	defer c.out.Unlock()
	c.writeRecordLocked(recordTypeHandshake, m.marshal())
}

// cloneHash copies a running SM3 state.
func cloneHash(h hash.Hash) hash.Hash {
	state, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		panic("tls13: cannot copy the transcript hash: " + err.Error())
	}
	n := sm3.New()
	if err := n.(encoding.BinaryUnmarshaler).UnmarshalBinary(state); err != nil {
		panic("tls13: cannot copy the transcript hash: " + err.Error())
	}
	return n
}
