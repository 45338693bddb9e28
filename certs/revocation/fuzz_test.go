package revocation

import (
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
)

// FuzzParseCRL feeds ParseCRL (PEM or DER, then the issuer match, the
// signature and the extension checks) arbitrary bytes: it must not
// panic, and what it accepts must answer lookups.
func FuzzParseCRL(f *testing.F) {
	sm, ec := newCA(f, "sm2"), newCA(f, "ecdsa")
	issuers := []*smx509.Certificate{sm.cert, ec.cert}
	now := time.Now()
	for _, ca := range []*testCA{sm, ec} {
		der := ca.crl(f, 7, now.Add(-time.Hour), now.Add(time.Hour), big.NewInt(1), big.NewInt(0x10000001))
		f.Add(der)
		f.Add(pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der}))
		f.Add(ca.crl(f, 1, now.Add(-time.Hour), now.Add(time.Hour)))
	}
	f.Add([]byte{0x30, 0x00})
	f.Add([]byte("-----BEGIN X509 CRL-----\n-----END X509 CRL-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if deferred, err := parseCRL(data, nil, true); err == nil {
			// Read before its issuer was known: checked with a chain's.
			for _, ca := range []*testCA{sm, ec} {
				if ok, err := deferred.covers(fromSM(ca.cert)); ok != (err == nil && string(deferred.rawIssuer) == string(ca.cert.RawSubject)) {
					t.Fatalf("covers = %v, %v", ok, err)
				}
			}
		}
		crl, err := ParseCRL(data, issuers)
		if err != nil {
			return
		}
		if crl.Issuer != sm.cert && crl.Issuer != ec.cert {
			t.Fatal("accepted a CRL without naming its issuer")
		}
		crl.Revoked(big.NewInt(1))
		_ = crl.CheckTime(now, time.Hour)
	})
}

// FuzzParseOCSPResponse feeds the OCSP response parser, the signature
// check and the lookup of an answer arbitrary bytes: no panic, and an
// answer is returned only for the certificate asked about.
func FuzzParseOCSPResponse(f *testing.F) {
	sm, ec := newCA(f, "sm2"), newCA(f, "ecdsa")
	now := time.Now()
	serial := big.NewInt(0x10000001)
	for _, ca := range []*testCA{sm, ec} {
		id, _ := newCertID(hashByOID(oidSHA1), oidSHA1, fromSM(ca.cert), serial)
		f.Add(ocspResponseDER(f, ca.cert, ca.key, false, id, ocspAnswer{status: StatusGood, thisUpdate: now, nextUpdate: now.Add(time.Hour)}))
		f.Add(ocspResponseDER(f, ca.cert, ca.key, false, id, ocspAnswer{status: StatusRevoked, revokedAt: now, reason: ReasonKeyCompromise, thisUpdate: now}))
		d, k := ca.responderCert(f, true)
		f.Add(ocspResponseDER(f, d, k, true, id, ocspAnswer{status: StatusUnknown, thisUpdate: now, nextUpdate: now.Add(time.Hour)}))
	}
	f.Add(statusOnly(ocspTryLater))
	f.Add([]byte{0x30, 0x03, 0x0a, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := parseOCSPResponse(data); err != nil {
			return
		}
		for _, ca := range []*testCA{sm, ec} {
			sr, err := checkOCSPAnswer(data, ca.cert, fromSM(ca.cert), serial, now, time.Hour)
			if err == nil && sr.id.serial.Cmp(serial) != 0 {
				t.Fatalf("answer for serial %v, asked about %v", sr.id.serial, serial)
			}
		}
	})
}
