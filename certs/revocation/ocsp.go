package revocation

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/asn1"
	"errors"
	"fmt"
	"hash"
	"math/big"
	"time"

	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/smx509"
	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

// OCSP (RFC 6960) is parsed here rather than with golang.org/x/crypto/ocsp,
// which knows neither SM2 signatures nor SM3 CertIDs.

// Hash is the hash of an OCSP CertID.
type Hash string

// The CertID hashes: SHA-1 (what RFC 5019 responders expect, the
// default), SHA-256, and SM3 (some GM responders).
const (
	HashSHA1   Hash = "sha1"
	HashSHA256 Hash = "sha256"
	HashSM3    Hash = "sm3"
)

var (
	oidSHA1      = asn1.ObjectIdentifier{1, 3, 14, 3, 2, 26}
	oidSHA256    = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 1}
	oidSM3       = asn1.ObjectIdentifier{1, 2, 156, 10197, 1, 401}
	oidOCSPBasic = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 48, 1, 1}
)

func (h Hash) oid() asn1.ObjectIdentifier {
	switch h {
	case HashSHA256:
		return oidSHA256
	case HashSM3:
		return oidSM3
	}
	return oidSHA1
}

// hashByOID returns the hash a CertID names, nil when unknown.
func hashByOID(oid asn1.ObjectIdentifier) func() hash.Hash {
	switch {
	case oid.Equal(oidSHA1):
		return sha1.New
	case oid.Equal(oidSHA256):
		return sha256.New
	case oid.Equal(oidSM3):
		return sm3.New
	}
	return nil
}

// ParseHash reads "sha1", "sha256" or "sm3"; the empty string is SHA-1.
func ParseHash(s string) (Hash, error) {
	switch Hash(s) {
	case "", HashSHA1:
		return HashSHA1, nil
	case HashSHA256, HashSM3:
		return Hash(s), nil
	}
	return "", fmt.Errorf("unknown OCSP hash %q: use sha1, sha256 or sm3", s)
}

// signatureAlgorithms maps the signature OIDs accepted on OCSP responses
// to smx509's algorithms. SHA-1 and MD5 signatures are refused.
var signatureAlgorithms = []struct {
	oid asn1.ObjectIdentifier
	alg smx509.SignatureAlgorithm
}{
	{asn1.ObjectIdentifier{1, 2, 156, 10197, 1, 501}, smx509.SM2WithSM3},
	{asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 2}, smx509.ECDSAWithSHA256},
	{asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 3}, smx509.ECDSAWithSHA384},
	{asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 4}, smx509.ECDSAWithSHA512},
	{asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 11}, smx509.SHA256WithRSA},
	{asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 12}, smx509.SHA384WithRSA},
	{asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 13}, smx509.SHA512WithRSA},
}

// Limits of a parsed OCSP response.
const (
	maxOCSPResponses = 64
	maxOCSPCerts     = 4
)

// OCSP responseStatus values (RFC 6960 section 4.2.1).
const (
	ocspSuccessful       = 0
	ocspMalformedRequest = 1
	ocspInternalError    = 2
	ocspTryLater         = 3
	ocspSigRequired      = 5
	ocspUnauthorized     = 6
)

// certID identifies a certificate to a responder.
type certID struct {
	hashOID                   asn1.ObjectIdentifier
	issuerNameHash, issuerKey []byte
	serial                    *big.Int
}

// newCertID computes the CertID of a certificate with serial issued by
// issuer, with hash h.
func newCertID(h func() hash.Hash, oid asn1.ObjectIdentifier, issuer cert, serial *big.Int) (certID, error) {
	key, err := subjectPublicKey(issuer.rawSPKI)
	if err != nil {
		return certID{}, err
	}
	nh, kh := h(), h()
	nh.Write(issuer.rawSubject)
	kh.Write(key)
	return certID{hashOID: oid, issuerNameHash: nh.Sum(nil), issuerKey: kh.Sum(nil), serial: serial}, nil
}

// subjectPublicKey returns the bits of the subjectPublicKey BIT STRING
// of a SubjectPublicKeyInfo, which a CertID hashes.
func subjectPublicKey(spki []byte) ([]byte, error) {
	s := cryptobyte.String(spki)
	var inner cryptobyte.String
	var key asn1.BitString
	if !s.ReadASN1(&inner, cbasn1.SEQUENCE) || !inner.SkipASN1(cbasn1.SEQUENCE) || !inner.ReadASN1BitString(&key) {
		return nil, errors.New("malformed subjectPublicKeyInfo")
	}
	return key.RightAlign(), nil
}

func (id certID) marshal(b *cryptobyte.Builder) {
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
			b.AddASN1ObjectIdentifier(id.hashOID)
			b.AddASN1NULL()
		})
		b.AddASN1OctetString(id.issuerNameHash)
		b.AddASN1OctetString(id.issuerKey)
		b.AddASN1BigInt(id.serial)
	})
}

func (id certID) equal(o certID) bool {
	return id.hashOID.Equal(o.hashOID) && bytes.Equal(id.issuerNameHash, o.issuerNameHash) &&
		bytes.Equal(id.issuerKey, o.issuerKey) && id.serial.Cmp(o.serial) == 0
}

// key is the cache key of a CertID.
func (id certID) key() string {
	var b cryptobyte.Builder
	id.marshal(&b)
	return string(b.BytesOrPanic())
}

// marshalOCSPRequest builds an unsigned OCSPRequest for one CertID,
// without a nonce (responses are cached and shared).
func marshalOCSPRequest(id certID) []byte {
	var b cryptobyte.Builder
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { // OCSPRequest
		b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { // TBSRequest
			b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { // requestList
				b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { // Request
					id.marshal(b)
				})
			})
		})
	})
	return b.BytesOrPanic()
}

// ocspResponse is a parsed OCSPResponse carrying a BasicOCSPResponse.
type ocspResponse struct {
	status        int
	tbs           []byte
	sigAlgOID     asn1.ObjectIdentifier
	signature     []byte
	certs         [][]byte
	responderName []byte
	responderKey  []byte
	producedAt    time.Time
	responses     []singleResponse
}

// singleResponse is one SingleResponse.
type singleResponse struct {
	id                     certID
	status                 Status
	revokedAt              time.Time
	reason                 Reason
	thisUpdate, nextUpdate time.Time
}

var errMalformedOCSP = errors.New("malformed OCSP response")

func malformed(what string) error { return fmt.Errorf("%w: %s", errMalformedOCSP, what) }

var (
	tagExplicit0 = cbasn1.Tag(0).Constructed().ContextSpecific()
	tagExplicit1 = cbasn1.Tag(1).Constructed().ContextSpecific()
	tagExplicit2 = cbasn1.Tag(2).Constructed().ContextSpecific()
)

// parseOCSPResponse parses an OCSPResponse. A response whose status is
// not successful is returned with that status and nothing else.
func parseOCSPResponse(der []byte) (*ocspResponse, error) {
	s := cryptobyte.String(der)
	var resp cryptobyte.String
	if !s.ReadASN1(&resp, cbasn1.SEQUENCE) || !s.Empty() {
		return nil, malformed("OCSPResponse")
	}
	var r ocspResponse
	var status int
	if !resp.ReadASN1Enum(&status) {
		return nil, malformed("responseStatus")
	}
	r.status = status
	if status != ocspSuccessful {
		return &r, nil
	}
	var rb, body cryptobyte.String
	var typOID asn1.ObjectIdentifier
	if !resp.ReadASN1(&rb, tagExplicit0) || !rb.ReadASN1(&rb, cbasn1.SEQUENCE) ||
		!rb.ReadASN1ObjectIdentifier(&typOID) || !rb.ReadASN1(&body, cbasn1.OCTET_STRING) || !resp.Empty() {
		return nil, malformed("responseBytes")
	}
	if !typOID.Equal(oidOCSPBasic) {
		return nil, fmt.Errorf("OCSP response type %s is not id-pkix-ocsp-basic", typOID)
	}
	if err := r.parseBasic(body); err != nil {
		return nil, err
	}
	return &r, nil
}

// parseBasic parses a BasicOCSPResponse.
func (r *ocspResponse) parseBasic(der cryptobyte.String) error {
	var basic, tbs, tbsFull, sigAlg cryptobyte.String
	if !der.ReadASN1(&basic, cbasn1.SEQUENCE) || !der.Empty() {
		return malformed("BasicOCSPResponse")
	}
	if !basic.ReadASN1Element(&tbsFull, cbasn1.SEQUENCE) {
		return malformed("tbsResponseData")
	}
	r.tbs = tbsFull
	if !tbsFull.ReadASN1(&tbs, cbasn1.SEQUENCE) {
		return malformed("tbsResponseData")
	}
	if !basic.ReadASN1(&sigAlg, cbasn1.SEQUENCE) || !sigAlg.ReadASN1ObjectIdentifier(&r.sigAlgOID) {
		return malformed("signatureAlgorithm")
	}
	var sig asn1.BitString
	if !basic.ReadASN1BitString(&sig) || sig.BitLength%8 != 0 {
		return malformed("signature")
	}
	r.signature = sig.Bytes
	var certs cryptobyte.String
	var hasCerts bool
	if !basic.ReadOptionalASN1(&certs, &hasCerts, tagExplicit0) || !basic.Empty() {
		return malformed("certs")
	}
	if hasCerts {
		if !certs.ReadASN1(&certs, cbasn1.SEQUENCE) {
			return malformed("certs")
		}
		for !certs.Empty() {
			var c cryptobyte.String
			if !certs.ReadASN1Element(&c, cbasn1.SEQUENCE) {
				return malformed("certs")
			}
			if len(r.certs) == maxOCSPCerts {
				return fmt.Errorf("the OCSP response carries more than %d certificates", maxOCSPCerts)
			}
			r.certs = append(r.certs, c)
		}
	}
	return r.parseResponseData(tbs)
}

// parseResponseData parses the fields of a ResponseData.
func (r *ocspResponse) parseResponseData(tbs cryptobyte.String) error {
	var ver cryptobyte.String
	var hasVer bool
	if !tbs.ReadOptionalASN1(&ver, &hasVer, tagExplicit0) {
		return malformed("version")
	}
	if hasVer {
		var v int
		if !ver.ReadASN1Integer(&v) || v != 0 || !ver.Empty() {
			return malformed("version")
		}
	}
	var rid cryptobyte.String
	var ridTag cbasn1.Tag
	if !tbs.ReadAnyASN1(&rid, &ridTag) {
		return malformed("responderID")
	}
	switch ridTag {
	case tagExplicit1:
		var name cryptobyte.String
		if !rid.ReadASN1Element(&name, cbasn1.SEQUENCE) || !rid.Empty() {
			return malformed("responderID")
		}
		r.responderName = name
	case tagExplicit2:
		var kh cryptobyte.String
		if !rid.ReadASN1(&kh, cbasn1.OCTET_STRING) || !rid.Empty() {
			return malformed("responderID")
		}
		r.responderKey = kh
	default:
		return malformed("responderID")
	}
	if !tbs.ReadASN1GeneralizedTime(&r.producedAt) {
		return malformed("producedAt")
	}
	var list cryptobyte.String
	if !tbs.ReadASN1(&list, cbasn1.SEQUENCE) {
		return malformed("responses")
	}
	for !list.Empty() {
		if len(r.responses) == maxOCSPResponses {
			return fmt.Errorf("the OCSP response carries more than %d responses", maxOCSPResponses)
		}
		var single cryptobyte.String
		if !list.ReadASN1(&single, cbasn1.SEQUENCE) {
			return malformed("SingleResponse")
		}
		sr, err := parseSingleResponse(single)
		if err != nil {
			return err
		}
		r.responses = append(r.responses, sr)
	}
	var exts cryptobyte.String
	var hasExts bool
	if !tbs.ReadOptionalASN1(&exts, &hasExts, tagExplicit1) || !tbs.Empty() {
		return malformed("responseExtensions")
	}
	if hasExts {
		return checkOCSPExtensions(exts)
	}
	return nil
}

func parseSingleResponse(s cryptobyte.String) (singleResponse, error) {
	var sr singleResponse
	var id, alg cryptobyte.String
	if !s.ReadASN1(&id, cbasn1.SEQUENCE) || !id.ReadASN1(&alg, cbasn1.SEQUENCE) || !alg.ReadASN1ObjectIdentifier(&sr.id.hashOID) {
		return sr, malformed("CertID")
	}
	if !alg.Empty() && (!alg.SkipASN1(cbasn1.NULL) || !alg.Empty()) {
		return sr, malformed("CertID hashAlgorithm")
	}
	var nameHash, keyHash cryptobyte.String
	sr.id.serial = new(big.Int)
	if !id.ReadASN1(&nameHash, cbasn1.OCTET_STRING) || !id.ReadASN1(&keyHash, cbasn1.OCTET_STRING) ||
		!id.ReadASN1Integer(sr.id.serial) || !id.Empty() {
		return sr, malformed("CertID")
	}
	sr.id.issuerNameHash, sr.id.issuerKey = nameHash, keyHash
	var st cryptobyte.String
	var stTag cbasn1.Tag
	if !s.ReadAnyASN1(&st, &stTag) {
		return sr, malformed("certStatus")
	}
	switch stTag {
	case cbasn1.Tag(0).ContextSpecific(): // good [0] IMPLICIT NULL
		if !st.Empty() {
			return sr, malformed("certStatus good")
		}
		sr.status = StatusGood
	case cbasn1.Tag(1).Constructed().ContextSpecific(): // revoked [1] IMPLICIT RevokedInfo
		sr.status = StatusRevoked
		if !st.ReadASN1GeneralizedTime(&sr.revokedAt) {
			return sr, malformed("revocationTime")
		}
		var reason cryptobyte.String
		var hasReason bool
		if !st.ReadOptionalASN1(&reason, &hasReason, tagExplicit0) || !st.Empty() {
			return sr, malformed("revocationReason")
		}
		if hasReason {
			var v int
			if !reason.ReadASN1Enum(&v) || !reason.Empty() {
				return sr, malformed("revocationReason")
			}
			sr.reason = Reason(v)
		}
	case cbasn1.Tag(2).ContextSpecific(): // unknown [2] IMPLICIT NULL
		if !st.Empty() {
			return sr, malformed("certStatus unknown")
		}
		sr.status = StatusUnknown
	default:
		return sr, malformed("certStatus")
	}
	if !s.ReadASN1GeneralizedTime(&sr.thisUpdate) {
		return sr, malformed("thisUpdate")
	}
	var next cryptobyte.String
	var hasNext bool
	if !s.ReadOptionalASN1(&next, &hasNext, tagExplicit0) {
		return sr, malformed("nextUpdate")
	}
	if hasNext && (!next.ReadASN1GeneralizedTime(&sr.nextUpdate) || !next.Empty()) {
		return sr, malformed("nextUpdate")
	}
	var exts cryptobyte.String
	var hasExts bool
	if !s.ReadOptionalASN1(&exts, &hasExts, tagExplicit1) || !s.Empty() {
		return sr, malformed("singleExtensions")
	}
	if hasExts {
		if err := checkOCSPExtensions(exts); err != nil {
			return sr, err
		}
	}
	return sr, nil
}

// checkOCSPExtensions refuses critical extensions: none is understood.
func checkOCSPExtensions(exts cryptobyte.String) error {
	var list cryptobyte.String
	if !exts.ReadASN1(&list, cbasn1.SEQUENCE) || !exts.Empty() {
		return malformed("extensions")
	}
	for !list.Empty() {
		var ext cryptobyte.String
		var id asn1.ObjectIdentifier
		critical := false
		if !list.ReadASN1(&ext, cbasn1.SEQUENCE) || !ext.ReadASN1ObjectIdentifier(&id) ||
			!ext.ReadOptionalASN1Boolean(&critical, cbasn1.BOOLEAN, false) || !ext.SkipASN1(cbasn1.OCTET_STRING) || !ext.Empty() {
			return malformed("extension")
		}
		if critical {
			return fmt.Errorf("the OCSP response has the critical extension %s, which gmgate does not know", id)
		}
	}
	return nil
}

// verify checks the response's signature: made by issuer itself, or by a
// responder certificate it carries that issuer signed for OCSP signing
// (id-kp-OCSPSigning) and that is valid at now.
func (r *ocspResponse) verify(issuer *smx509.Certificate, now time.Time) error {
	alg, ok := smx509.UnknownSignatureAlgorithm, false
	for _, a := range signatureAlgorithms {
		if a.oid.Equal(r.sigAlgOID) {
			alg, ok = a.alg, true
		}
	}
	if !ok {
		return fmt.Errorf("the OCSP response is signed with %s, which gmgate does not accept (SM2-with-SM3, ECDSA or RSA with SHA-2)", r.sigAlgOID)
	}
	if r.signedBy(issuer) {
		if err := issuer.CheckSignature(alg, r.tbs, r.signature); err != nil {
			return fmt.Errorf("the OCSP response's signature does not verify with the key of CA %q: %v", issuer.Subject.String(), err)
		}
		return nil
	}
	for _, der := range r.certs {
		responder, err := smx509.ParseCertificate(der)
		if err != nil || !r.signedBy(responder) {
			continue
		}
		if err := responder.CheckSignatureFrom(issuer); err != nil {
			return fmt.Errorf("the OCSP responder certificate %q was not issued by CA %q", responder.Subject.String(), issuer.Subject.String())
		}
		if !hasOCSPSigning(responder) {
			return fmt.Errorf("the OCSP responder certificate %q is not authorised for OCSP signing (no extended key usage id-kp-OCSPSigning)", responder.Subject.String())
		}
		if now.Before(responder.NotBefore) || now.After(responder.NotAfter) {
			return fmt.Errorf("the OCSP responder certificate %q is not valid now", responder.Subject.String())
		}
		if err := responder.CheckSignature(alg, r.tbs, r.signature); err != nil {
			return fmt.Errorf("the OCSP response's signature does not verify with the key of responder %q: %v", responder.Subject.String(), err)
		}
		return nil
	}
	return fmt.Errorf("the OCSP response was signed neither by CA %q nor by a responder certificate it carries from that CA", issuer.Subject.String())
}

// signedBy reports whether the responderID names c.
func (r *ocspResponse) signedBy(c *smx509.Certificate) bool {
	if r.responderName != nil {
		return bytes.Equal(r.responderName, c.RawSubject)
	}
	key, err := subjectPublicKey(c.RawSubjectPublicKeyInfo)
	if err != nil {
		return false
	}
	h := sha1.Sum(key)
	return bytes.Equal(r.responderKey, h[:])
}

func hasOCSPSigning(c *smx509.Certificate) bool {
	for _, u := range c.ExtKeyUsage {
		if u == smx509.ExtKeyUsageOCSPSigning {
			return true
		}
	}
	return false
}

// find returns the SingleResponse for a certificate with serial issued by
// issuer, whatever CertID hash the responder used.
func (r *ocspResponse) find(issuer cert, serial *big.Int) (singleResponse, bool) {
	for _, sr := range r.responses {
		h := hashByOID(sr.id.hashOID)
		if h == nil || sr.id.serial.Cmp(serial) != 0 {
			continue
		}
		want, err := newCertID(h, sr.id.hashOID, issuer, serial)
		if err == nil && want.equal(sr.id) {
			return sr, true
		}
	}
	return singleResponse{}, false
}

// statusText explains an OCSP responseStatus other than successful.
func statusText(status int) string {
	switch status {
	case ocspMalformedRequest:
		return "malformedRequest"
	case ocspInternalError:
		return "internalError"
	case ocspTryLater:
		return "tryLater"
	case ocspSigRequired:
		return "sigRequired"
	case ocspUnauthorized:
		return "unauthorized (the responder does not answer for this CA)"
	}
	return fmt.Sprintf("status %d", status)
}
