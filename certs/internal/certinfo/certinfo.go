// Package certinfo holds what the runtime certificate loader (package
// certs) and the offline tools (package certs/pki) both say about a
// certificate or key: the TLCP key usages and their names, what a
// public key is, the SM2 user-ID check, and the fixes added to key
// errors. It must not read files or open keys.
package certinfo

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/big"
	"strings"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/accel"
)

// Key usages of the two TLCP certificates.
const (
	SignKeyUsage = smx509.KeyUsageDigitalSignature | smx509.KeyUsageContentCommitment
	EncKeyUsage  = smx509.KeyUsageKeyEncipherment | smx509.KeyUsageDataEncipherment | smx509.KeyUsageKeyAgreement
)

// Now is f(), or the time now when f is nil.
func Now(f func() time.Time) time.Time {
	if f != nil {
		return f()
	}
	return time.Now()
}

// PublicKeysEqual reports whether two public keys have the same encoding.
func PublicKeysEqual(a, b crypto.PublicKey) bool {
	da, err1 := smx509.MarshalPKIXPublicKey(a)
	db, err2 := smx509.MarshalPKIXPublicKey(b)
	return err1 == nil && err2 == nil && string(da) == string(db)
}

// MissingFile says that the file a field names does not exist, and what
// to give instead. A field that is a command's flag ("--cert") has no
// configuration file whose directory a relative path would start from.
func MissingFile(field, path, want string) error {
	if strings.HasPrefix(field, "-") {
		return fmt.Errorf("%s %s does not exist; give the path of %s (a relative path is relative to the current directory)", field, path, want)
	}
	return fmt.Errorf("%s %s does not exist; give the path of %s (a relative path is relative to the configuration file's directory)", field, path, want)
}

// ExplainKeyError adds the fix to key errors that need one.
func ExplainKeyError(err error) error {
	if errors.Is(err, accel.ErrKeyPassword) {
		return fmt.Errorf("%w; check the password that password-env or password-file gives", err)
	}
	return ExplainPermission(err)
}

// ExplainPermission adds the fix to an error reading a file that the
// user gmgate runs as may not read, as happens to files written 0600 by
// root when the systemd unit runs gmgate as its own user.
func ExplainPermission(err error) error {
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("%w; make the file readable by the user gmgate runs as (with the systemd unit: chgrp gmgate FILE && chmod 0640 FILE)", err)
	}
	return err
}

func HasEKU(c *smx509.Certificate, want smx509.ExtKeyUsage) bool {
	for _, e := range c.ExtKeyUsage {
		if e == want {
			return true
		}
	}
	return false
}

// LooksLikeSign and LooksLikeEnc classify a certificate by key usage.
func LooksLikeSign(c *smx509.Certificate) bool {
	return c.KeyUsage&smx509.KeyUsageDigitalSignature != 0 && c.KeyUsage&EncKeyUsage == 0
}

func LooksLikeEnc(c *smx509.Certificate) bool {
	return c.KeyUsage&EncKeyUsage != 0 && c.KeyUsage&smx509.KeyUsageDigitalSignature == 0
}

var keyUsageNames = []struct {
	bit  smx509.KeyUsage
	name string
}{
	{smx509.KeyUsageDigitalSignature, "digitalSignature"},
	{smx509.KeyUsageContentCommitment, "nonRepudiation"},
	{smx509.KeyUsageKeyEncipherment, "keyEncipherment"},
	{smx509.KeyUsageDataEncipherment, "dataEncipherment"},
	{smx509.KeyUsageKeyAgreement, "keyAgreement"},
	{smx509.KeyUsageCertSign, "keyCertSign"},
	{smx509.KeyUsageCRLSign, "cRLSign"},
	{smx509.KeyUsageEncipherOnly, "encipherOnly"},
	{smx509.KeyUsageDecipherOnly, "decipherOnly"},
}

func KeyUsageString(ku smx509.KeyUsage) string {
	if ku == 0 {
		return "(none)"
	}
	var out []string
	for _, n := range keyUsageNames {
		if ku&n.bit != 0 {
			out = append(out, n.name)
		}
	}
	return strings.Join(out, ", ")
}

var ekuNames = map[smx509.ExtKeyUsage]string{
	smx509.ExtKeyUsageAny:             "any",
	smx509.ExtKeyUsageServerAuth:      "serverAuth",
	smx509.ExtKeyUsageClientAuth:      "clientAuth",
	smx509.ExtKeyUsageCodeSigning:     "codeSigning",
	smx509.ExtKeyUsageEmailProtection: "emailProtection",
	smx509.ExtKeyUsageTimeStamping:    "timeStamping",
	smx509.ExtKeyUsageOCSPSigning:     "OCSPSigning",
}

func EKUString(ekus []smx509.ExtKeyUsage) string {
	var out []string
	for _, e := range ekus {
		if n, ok := ekuNames[e]; ok {
			out = append(out, n)
		} else {
			out = append(out, fmt.Sprintf("eku(%d)", e))
		}
	}
	return strings.Join(out, ", ")
}

// SANString lists a certificate's subject alternative names in order.
func SANString(c *smx509.Certificate) string {
	var out []string
	for _, d := range c.DNSNames {
		out = append(out, "DNS:"+d)
	}
	for _, ip := range c.IPAddresses {
		out = append(out, "IP:"+ip.String())
	}
	for _, e := range c.EmailAddresses {
		out = append(out, "email:"+e)
	}
	for _, u := range c.URIs {
		out = append(out, "URI:"+u.String())
	}
	return strings.Join(out, ", ")
}

// DescribePublicKey names a key's type and size ("SM2", "RSA-2048",
// "ECDSA P-256").
func DescribePublicKey(pub any) string {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if sm2.IsSM2PublicKey(k) {
			return "SM2"
		}
		return "ECDSA " + k.Curve.Params().Name
	case *rsa.PublicKey:
		return fmt.Sprintf("RSA-%d", k.N.BitLen())
	case ed25519.PublicKey:
		return "Ed25519"
	}
	return fmt.Sprintf("%T", pub)
}

func Ago(d time.Duration) string {
	days := d.Hours() / 24
	if days >= 1 {
		return fmt.Sprintf("%d days", int(math.Floor(days)))
	}
	return d.Round(time.Minute).String()
}

// ZAWithID computes Z = SM3(ENTL || ID || a || b || xG || yG || xP || yP)
// for any user ID, including the empty one (gmsm substitutes the default
// ID for an empty one, which is what we need to tell the two apart).
func ZAWithID(point []byte, id []byte) []byte {
	params := sm2.P256().Params()
	size := (params.BitSize + 7) / 8
	fixed := func(b []byte) []byte {
		out := make([]byte, size)
		copy(out[size-len(b):], b)
		return out
	}
	a := new(big.Int).Sub(params.P, big.NewInt(3))
	h := sm3.New()
	var entl [2]byte
	binary.BigEndian.PutUint16(entl[:], uint16(len(id)*8))
	h.Write(entl[:])
	h.Write(id)
	h.Write(fixed(a.Bytes()))
	h.Write(fixed(params.B.Bytes()))
	h.Write(fixed(params.Gx.Bytes()))
	h.Write(fixed(params.Gy.Bytes()))
	h.Write(point[1:])
	return h.Sum(nil)
}

// VerifySM2WithID checks an SM2 signature over msg with the given user ID.
func VerifySM2WithID(pub *ecdsa.PublicKey, id, msg, sig []byte) bool {
	point, ok := UncompressedPoint(pub)
	if !ok {
		return false
	}
	h := sm3.New()
	h.Write(ZAWithID(point, id))
	h.Write(msg)
	return sm2.VerifyASN1(pub, h.Sum(nil), sig)
}

// UncompressedPoint returns the 04||X||Y encoding of an SM2 public key.
func UncompressedPoint(pub *ecdsa.PublicKey) ([]byte, bool) {
	if pub == nil || !sm2.IsSM2PublicKey(pub) {
		return nil, false
	}
	der, err := smx509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, false
	}
	var spki struct {
		Algorithm pkix.AlgorithmIdentifier
		Key       asn1.BitString
	}
	if rest, err := asn1.Unmarshal(der, &spki); err != nil || len(rest) > 0 {
		return nil, false
	}
	p := spki.Key.RightAlign()
	if len(p) != 65 || p[0] != 4 {
		return nil, false
	}
	return p, true
}

// DefaultSM2ID is the user ID every TLCP implementation signs with.
var DefaultSM2ID = []byte("1234567812345678")

// SignedWithEmptyID reports whether child's SM2 signature fails with the
// default user ID but verifies with the empty one under parent's key: the
// mark of a certificate signed by OpenSSL 3.0 without
// -sigopt distid:1234567812345678.
func SignedWithEmptyID(child, parent *smx509.Certificate) bool {
	if child.SignatureAlgorithm != smx509.SM2WithSM3 {
		return false
	}
	pub, ok := parent.PublicKey.(*ecdsa.PublicKey)
	if !ok {
		return false
	}
	return !VerifySM2WithID(pub, DefaultSM2ID, child.RawTBSCertificate, child.Signature) &&
		VerifySM2WithID(pub, nil, child.RawTBSCertificate, child.Signature)
}

// EmptyIDAdvice explains how to fix a certificate signed with an empty
// SM2 user ID.
const EmptyIDAdvice = "its SM2 signature verifies only with an EMPTY user ID, not with the default ID 1234567812345678 that TLCP peers use: " +
	"it was signed by OpenSSL 3 without -sigopt distid:1234567812345678. Re-sign it with " +
	"'openssl x509 -req ... -sm3 -sigopt distid:1234567812345678 -vfyopt distid:1234567812345678' " +
	"(and 'openssl req ... -sm3 -sigopt distid:1234567812345678' for CSRs and self-signed CAs), or issue it with gmgate cert issue"
