package testocsp

import (
	"crypto"
	"crypto/rand"
	"crypto/sha1"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
	"golang.org/x/crypto/ocsp"
)

// SM2CA is the SM2 side of a CA made by NewSM2.
type SM2CA struct {
	Cert *smx509.Certificate
	Key  *sm2.PrivateKey
}

// NewSM2 starts an SM2 CA and its responder on loopback.
func NewSM2(t testing.TB) *CA {
	t.Helper()
	key, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &smx509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "OCSP test SM2 CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: smx509.KeyUsageCertSign | smx509.KeyUsageCRLSign,
	}
	der, err := smx509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := smx509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{SM2: &SM2CA{Cert: cert, Key: key}}
	ca.start(t)
	return ca
}

// Pair is a TLCP certificate pair of an SM2 CA, as files hold them.
type Pair struct {
	Sign, Enc *smx509.Certificate
	// SignPEM is the signing certificate followed by the CA's; EncPEM
	// the encryption certificate; the keys are PKCS#8.
	SignPEM, SignKeyPEM, EncPEM, EncKeyPEM []byte
}

// IssueTLCP makes a TLCP server pair for names whose signing certificate
// names the responder.
func (ca *CA) IssueTLCP(t testing.TB, names ...string) *Pair {
	t.Helper()
	p := &Pair{}
	for _, enc := range []bool{false, true} {
		key, err := sm2.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &smx509.Certificate{
			SerialNumber: big.NewInt(ca.serial.Add(1)), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(12 * time.Hour),
			KeyUsage: smx509.KeyUsageDigitalSignature, ExtKeyUsage: []smx509.ExtKeyUsage{smx509.ExtKeyUsageServerAuth},
		}
		if enc {
			tmpl.KeyUsage = smx509.KeyUsageKeyEncipherment | smx509.KeyUsageDataEncipherment | smx509.KeyUsageKeyAgreement
		} else {
			tmpl.OCSPServer = []string{ca.URL}
		}
		der, err := smx509.CreateCertificate(rand.Reader, tmpl, ca.SM2.Cert, &key.PublicKey, ca.SM2.Key)
		if err != nil {
			t.Fatal(err)
		}
		pk, err := smx509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		cert, _ := smx509.ParseCertificate(der)
		certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk})
		if enc {
			p.Enc, p.EncPEM, p.EncKeyPEM = cert, certPEM, keyPEM
		} else {
			p.Sign, p.SignKeyPEM = cert, keyPEM
			p.SignPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.SM2.Cert.Raw})...)
		}
	}
	return p
}

var (
	oidSHA1       = asn1.ObjectIdentifier{1, 3, 14, 3, 2, 26}
	oidSM2WithSM3 = asn1.ObjectIdentifier{1, 2, 156, 10197, 1, 501}
	oidOCSPBasic  = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 48, 1, 1}
)

// response is a BasicOCSPResponse (RFC 6960 §4.2.1) about the request's
// certificate with the status of tmpl, signed with SM2-with-SM3 and
// naming the CA by key hash.
func (ca *SM2CA) response(req *ocsp.Request, tmpl ocsp.Response) ([]byte, error) {
	if req.HashAlgorithm != crypto.SHA1 {
		return nil, errors.New("the SM2 test responder answers SHA-1 CertIDs only")
	}
	var spki struct {
		Algorithm pkix.AlgorithmIdentifier
		Key       asn1.BitString
	}
	if _, err := asn1.Unmarshal(ca.Cert.RawSubjectPublicKeyInfo, &spki); err != nil {
		return nil, err
	}
	keyHash := sha1.Sum(spki.Key.RightAlign())
	var tbs cryptobyte.Builder
	tbs.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { // ResponseData
		b.AddASN1(cbasn1.Tag(2).ContextSpecific().Constructed(), func(b *cryptobyte.Builder) { // byKey
			b.AddASN1OctetString(keyHash[:])
		})
		b.AddASN1GeneralizedTime(tmpl.ThisUpdate.UTC())
		b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { // responses
			b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { // SingleResponse
				b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { // CertID
					b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
						b.AddASN1ObjectIdentifier(oidSHA1)
						b.AddASN1NULL()
					})
					b.AddASN1OctetString(req.IssuerNameHash)
					b.AddASN1OctetString(req.IssuerKeyHash)
					b.AddASN1BigInt(req.SerialNumber)
				})
				if tmpl.Status == ocsp.Revoked {
					b.AddASN1(cbasn1.Tag(1).ContextSpecific().Constructed(), func(b *cryptobyte.Builder) {
						b.AddASN1GeneralizedTime(tmpl.RevokedAt.UTC())
					})
				} else {
					b.AddASN1(cbasn1.Tag(0).ContextSpecific(), func(*cryptobyte.Builder) {}) // good
				}
				b.AddASN1GeneralizedTime(tmpl.ThisUpdate.UTC())
				b.AddASN1(cbasn1.Tag(0).ContextSpecific().Constructed(), func(b *cryptobyte.Builder) {
					b.AddASN1GeneralizedTime(tmpl.NextUpdate.UTC())
				})
			})
		})
	})
	tbsDER, err := tbs.Bytes()
	if err != nil {
		return nil, err
	}
	sig, err := ca.Key.Sign(rand.Reader, tbsDER, sm2.DefaultSM2SignerOpts)
	if err != nil {
		return nil, err
	}
	var basic cryptobyte.Builder
	basic.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddBytes(tbsDER)
		b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { b.AddASN1ObjectIdentifier(oidSM2WithSM3) })
		b.AddASN1BitString(sig)
	})
	basicDER, err := basic.Bytes()
	if err != nil {
		return nil, err
	}
	var resp cryptobyte.Builder
	resp.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1Enum(0) // successful
		b.AddASN1(cbasn1.Tag(0).ContextSpecific().Constructed(), func(b *cryptobyte.Builder) {
			b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
				b.AddASN1ObjectIdentifier(oidOCSPBasic)
				b.AddASN1OctetString(basicDER)
			})
		})
	})
	return resp.Bytes()
}
