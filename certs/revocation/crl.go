package revocation

import (
	"bytes"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

// CRL is a certificate revocation list whose signature verified with
// the certificate of its issuer.
type CRL struct {
	// Issuer is the CA certificate whose key signed the CRL; nil for a
	// CRL whose issuer was not among the CAs given when it was read,
	// whose signature is checked with the issuer of the first verified
	// chain that names it (see CRLOptions.Issuers).
	Issuer *smx509.Certificate
	// ThisUpdate and NextUpdate are the CRL's own times.
	ThisUpdate, NextUpdate time.Time
	// Number is the cRLNumber, nil when the CRL has none.
	Number *big.Int
	// SignatureAlgorithm is the algorithm of the CRL's signature.
	SignatureAlgorithm smx509.SignatureAlgorithm
	revoked            map[string]revokedEntry

	// For a CRL whose issuer is not known yet: what its signature
	// check needs, and the outcome per issuer key already tried.
	rawIssuer, authorityKeyID []byte
	tbs, signature            []byte
	checked                   sync.Map // string(issuer SPKI) -> error (nil: verified)
	issuerName                string
}

type revokedEntry struct {
	at     time.Time
	reason Reason
}

var (
	oidDeltaCRLIndicator     = asn1.ObjectIdentifier{2, 5, 29, 27}
	oidIssuingDistribution   = asn1.ObjectIdentifier{2, 5, 29, 28}
	oidCertificateIssuer     = asn1.ObjectIdentifier{2, 5, 29, 29}
	oidReasonCode            = asn1.ObjectIdentifier{2, 5, 29, 21}
	oidInvalidityDate        = asn1.ObjectIdentifier{2, 5, 29, 24}
	oidCRLNumber             = asn1.ObjectIdentifier{2, 5, 29, 20}
	oidAuthorityKeyID        = asn1.ObjectIdentifier{2, 5, 29, 35}
	oidAuthorityInfoAccess   = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 1, 1}
	oidFreshestCRL           = asn1.ObjectIdentifier{2, 5, 29, 46}
	understoodCRLExtensions  = []asn1.ObjectIdentifier{oidIssuingDistribution, oidCRLNumber, oidAuthorityKeyID, oidAuthorityInfoAccess, oidFreshestCRL}
	understoodEntryExtension = []asn1.ObjectIdentifier{oidReasonCode, oidInvalidityDate}
)

// ParseCRL reads a CRL, PEM ("X509 CRL") or DER, and checks it against
// the CAs that may issue it: its issuer name must be the subject of one
// of issuers whose key verifies its signature (SM2-with-SM3 with the
// default user ID 1234567812345678, ECDSA or RSA). It refuses delta and
// indirect CRLs, CRLs without nextUpdate, and critical extensions it
// does not know. It does not compare the CRL's times with the clock
// (see CheckTime).
func ParseCRL(data []byte, issuers []*smx509.Certificate) (*CRL, error) {
	return parseCRL(data, issuers, false)
}

// errIssuerNotGiven marks a CRL whose issuer is none of the CAs given.
var errIssuerNotGiven = errors.New("issuer not given")

// parseCRL is ParseCRL; with deferIssuer, a CRL whose issuer name is none
// of issuers' is returned unverified, with a nil Issuer.
func parseCRL(data []byte, issuers []*smx509.Certificate, deferIssuer bool) (*CRL, error) {
	der := data
	if t := bytes.TrimLeft(data, " \t\r\n"); bytes.HasPrefix(t, []byte("-----BEGIN")) {
		block, _ := pem.Decode(t)
		if block == nil || block.Type != "X509 CRL" {
			return nil, errors.New("not a PEM CRL (want a block \"X509 CRL\")")
		}
		der = block.Bytes
	}
	rl, err := smx509.ParseRevocationList(der)
	if err != nil {
		return nil, fmt.Errorf("not a CRL: %v", err)
	}
	if rl.NextUpdate.IsZero() {
		return nil, errors.New("the CRL has no nextUpdate, so nobody can tell when it is out of date; have the CA issue CRLs with a nextUpdate")
	}
	if !rl.NextUpdate.After(rl.ThisUpdate) {
		return nil, fmt.Errorf("the CRL's nextUpdate %s is not after its thisUpdate %s", rl.NextUpdate.UTC().Format(time.RFC3339), rl.ThisUpdate.UTC().Format(time.RFC3339))
	}
	if err := checkCRLExtensions(rl); err != nil {
		return nil, err
	}
	issuer, err := crlIssuer(rl, issuers)
	if err != nil && (!deferIssuer || !errors.Is(err, errIssuerNotGiven)) {
		return nil, err
	}
	c := &CRL{Issuer: issuer, ThisUpdate: rl.ThisUpdate, NextUpdate: rl.NextUpdate, Number: rl.Number,
		SignatureAlgorithm: rl.SignatureAlgorithm, revoked: make(map[string]revokedEntry, len(rl.RevokedCertificateEntries))}
	if issuer == nil {
		c.rawIssuer, c.authorityKeyID, c.tbs, c.signature = rl.RawIssuer, rl.AuthorityKeyId, rl.RawTBSRevocationList, rl.Signature
		c.issuerName = rl.Issuer.String()
	}
	for _, e := range rl.RevokedCertificateEntries {
		for _, ext := range e.Extensions {
			if ext.Id.Equal(oidCertificateIssuer) {
				return nil, errors.New("the CRL is indirect (an entry names another certificate issuer), which gmgate does not support")
			}
			if ext.Critical && !knownOID(ext.Id, understoodEntryExtension) {
				return nil, fmt.Errorf("an entry of the CRL has the critical extension %s, which gmgate does not know", ext.Id)
			}
		}
		if Reason(e.ReasonCode) == ReasonRemoveFromCRL {
			continue
		}
		c.revoked[serialKey(e.SerialNumber)] = revokedEntry{at: e.RevocationTime, reason: Reason(e.ReasonCode)}
	}
	return c, nil
}

// checkCRLExtensions refuses what would change the CRL's meaning in ways
// not implemented: a delta CRL, a partitioned or indirect scope, or an
// unknown critical extension.
func checkCRLExtensions(rl *smx509.RevocationList) error {
	for _, ext := range rl.Extensions {
		switch {
		case ext.Id.Equal(oidDeltaCRLIndicator):
			return errors.New("the CRL is a delta CRL; give the complete (base) CRL")
		case ext.Id.Equal(oidIssuingDistribution):
			if err := checkIssuingDistributionPoint(ext.Value); err != nil {
				return err
			}
		case ext.Critical && !knownOID(ext.Id, understoodCRLExtensions):
			return fmt.Errorf("the CRL has the critical extension %s, which gmgate does not know", ext.Id)
		}
	}
	return nil
}

// checkIssuingDistributionPoint accepts an issuingDistributionPoint
// (RFC 5280 section 5.2.5) that limits the CRL to end-entity
// certificates at most: not one for CA or attribute certificates, for
// some reasons only, or an indirect CRL.
func checkIssuingDistributionPoint(value []byte) error {
	s := cryptobyte.String(value)
	var idp cryptobyte.String
	if !s.ReadASN1(&idp, cbasn1.SEQUENCE) || !s.Empty() {
		return errors.New("the CRL's issuingDistributionPoint is malformed")
	}
	for !idp.Empty() {
		var tag cbasn1.Tag
		var field cryptobyte.String
		if !idp.ReadAnyASN1(&field, &tag) {
			return errors.New("the CRL's issuingDistributionPoint is malformed")
		}
		switch tag {
		case cbasn1.Tag(0).Constructed().ContextSpecific(), cbasn1.Tag(1).ContextSpecific():
			// distributionPoint, onlyContainsUserCerts: the scope fits
			// client certificates.
		default:
			return errors.New("the CRL covers only CA or attribute certificates, only some reasons, or is indirect (issuingDistributionPoint); give a complete CRL for end-entity certificates")
		}
	}
	return nil
}

func knownOID(id asn1.ObjectIdentifier, known []asn1.ObjectIdentifier) bool {
	for _, k := range known {
		if id.Equal(k) {
			return true
		}
	}
	return false
}

// crlIssuer finds the CA among issuers that signed rl.
func crlIssuer(rl *smx509.RevocationList, issuers []*smx509.Certificate) (*smx509.Certificate, error) {
	var named *smx509.Certificate
	var lastErr error
	otherKey := false
	for _, ca := range issuers {
		if !bytes.Equal(ca.RawSubject, rl.RawIssuer) {
			continue
		}
		if len(rl.AuthorityKeyId) > 0 && len(ca.SubjectKeyId) > 0 && !bytes.Equal(rl.AuthorityKeyId, ca.SubjectKeyId) {
			otherKey = true
			continue
		}
		named = ca
		if lastErr = rl.CheckSignatureFrom(ca); lastErr == nil {
			return ca, nil
		}
	}
	if named == nil && otherKey {
		return nil, fmt.Errorf("the CRL's issuer %q is a CA given, but the CRL was signed by another key of that name (its authorityKeyIdentifier differs); give the CA certificate whose key signs the CRLs", rl.Issuer.String())
	}
	if named == nil {
		return nil, fmt.Errorf("the CRL's issuer %q is none of the CAs that verify client certificates; give the CRL of one of them, or add its CA: %w", rl.Issuer.String(), errIssuerNotGiven)
	}
	return nil, fmt.Errorf("the CRL's signature does not verify with the key of CA %q (%v); it was not issued by that CA, or was altered", named.Subject.String(), lastErr)
}

// CheckTime reports whether the CRL may be used at now: its thisUpdate
// is not in the future (beyond a few minutes of clock skew) and its
// nextUpdate plus grace has not passed.
func (c *CRL) CheckTime(now time.Time, grace time.Duration) error {
	if c.ThisUpdate.After(now.Add(clockSkew)) {
		return fmt.Errorf("the CRL's thisUpdate %s is in the future; check the clocks", c.ThisUpdate.UTC().Format(time.RFC3339))
	}
	if now.After(c.NextUpdate.Add(grace)) {
		return fmt.Errorf("the CRL expired: its nextUpdate %s (plus a grace of %s) has passed", c.NextUpdate.UTC().Format(time.RFC3339), grace)
	}
	return nil
}

// Revoked reports whether the certificate with serial is listed, with
// when and why it was revoked.
func (c *CRL) Revoked(serial *big.Int) (at time.Time, reason Reason, revoked bool) {
	e, ok := c.revoked[serialKey(serial)]
	return e.at, e.reason, ok
}

// Len is the number of certificates the CRL lists.
func (c *CRL) Len() int { return len(c.revoked) }

// covers reports whether the CRL was signed by the CA that issued a
// certificate, that CA being issuer in the verified chain: same name,
// same key. For a CRL read before its issuer was known, the error says
// why its signature does not verify with that issuer.
func (c *CRL) covers(issuer cert) (bool, error) {
	if c.Issuer != nil {
		return bytes.Equal(c.Issuer.RawSubject, issuer.rawSubject) &&
			bytes.Equal(c.Issuer.RawSubjectPublicKeyInfo, issuer.rawSPKI), nil
	}
	if !bytes.Equal(c.rawIssuer, issuer.rawSubject) {
		return false, nil
	}
	if v, ok := c.checked.Load(string(issuer.rawSPKI)); ok {
		err, _ := v.(error)
		return err == nil, err
	}
	err := c.verifyWith(issuer)
	c.checked.Store(string(issuer.rawSPKI), err)
	return err == nil, err
}

// verifyWith checks the signature of a CRL read before its issuer was
// known with the issuer of a verified chain.
func (c *CRL) verifyWith(issuer cert) error {
	ca, err := issuer.parsed()
	if err != nil {
		return fmt.Errorf("the issuer certificate does not parse: %v", err)
	}
	if len(c.authorityKeyID) > 0 && len(ca.SubjectKeyId) > 0 && !bytes.Equal(c.authorityKeyID, ca.SubjectKeyId) {
		return fmt.Errorf("the CRL of %q was signed by another key of that name (its authorityKeyIdentifier differs)", c.issuerName)
	}
	rl := &smx509.RevocationList{RawTBSRevocationList: c.tbs, Signature: c.signature, SignatureAlgorithm: c.SignatureAlgorithm}
	if err := rl.CheckSignatureFrom(ca); err != nil {
		return fmt.Errorf("the CRL's signature does not verify with the key of CA %q (%v)", ca.Subject.String(), err)
	}
	return nil
}

// newerThan reports whether c may replace old: a later or equal
// cRLNumber, or when either has none, a thisUpdate not before old's.
// Only CRLs whose signatures were verified when read are compared: the
// numbers of one not verified yet are not to be trusted.
func (c *CRL) newerThan(old *CRL) bool {
	if old == nil || c.Issuer == nil || old.Issuer == nil {
		return true
	}
	if c.Number != nil && old.Number != nil {
		return c.Number.Cmp(old.Number) >= 0
	}
	return !c.ThisUpdate.Before(old.ThisUpdate)
}

// serialKey is a map key for a serial number, negative ones (which
// broken CAs issue) apart from positive ones.
func serialKey(n *big.Int) string {
	if n == nil {
		return ""
	}
	if n.Sign() < 0 {
		return "-" + string(n.Bytes())
	}
	return string(n.Bytes())
}
