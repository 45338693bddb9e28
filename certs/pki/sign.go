package pki

import (
	"bytes"
	"crypto/ecdsa"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs/internal/certinfo"
	"github.com/gmgate/gmgate/certs/internal/pemfile"
)

// Roles a signed certificate takes.
const (
	RoleSign = "sign" // TLCP signing certificate
	RoleEnc  = "enc"  // TLCP encryption certificate
	RoleTLS  = "tls"  // TLS certificate (RSA or ECDSA key)
)

// ReadCSR reads a certificate request (PEM or DER) and checks its
// self-signature, recognising an SM2 request signed with the empty user ID
// of OpenSSL 3.
func ReadCSR(path string) (*smx509.CertificateRequest, error) {
	data, err := pemfile.ReadSmallFile(path)
	if err != nil {
		return nil, err
	}
	der := bytes.TrimSpace(data)
	block, _ := pem.Decode(data)
	if block != nil {
		if block.Type != "CERTIFICATE REQUEST" && block.Type != "NEW CERTIFICATE REQUEST" {
			return nil, fmt.Errorf("%s holds a %s, not a CERTIFICATE REQUEST", path, block.Type)
		}
		der = block.Bytes
	}
	csr, err := smx509.ParseCertificateRequest(der)
	if err != nil {
		// The parser's ASN.1 detail helps no one who gave the wrong file.
		if block != nil {
			return nil, fmt.Errorf("%s: its CERTIFICATE REQUEST block is not a PKCS#10 request (damaged, or cut short); make the request again (gmgate cert csr, openssl req -new, or your device's tool)", path)
		}
		return nil, fmt.Errorf("%s is not a certificate request: give a PKCS#10 request, PEM (-----BEGIN CERTIFICATE REQUEST-----) or DER, as gmgate cert csr, openssl req -new and GM device tools write it", path)
	}
	if err := csr.CheckSignature(); err != nil {
		pub, ok := csr.PublicKey.(*ecdsa.PublicKey)
		if ok && csr.SignatureAlgorithm == smx509.SM2WithSM3 && certinfo.VerifySM2WithID(pub, nil, csr.RawTBSCertificateRequest, csr.Signature) {
			return nil, fmt.Errorf("%s: SM2 signature signed with an empty user ID: %s", path, certinfo.EmptyIDAdvice)
		}
		return nil, fmt.Errorf("%s: the request's signature does not verify with its own key (%v); make the request again", path, err)
	}
	return csr, nil
}

// SignOptions adjust SignCSR.
type SignOptions struct {
	// Role is RoleSign or RoleEnc for an SM2 request, to choose (or
	// confirm) what the certificate is for; empty takes it from the key
	// usage the request asks for.
	Role string
	// Validity of the certificate; DefaultLeafValidity when zero.
	Validity time.Duration
	Now      func() time.Time
}

// SignCSR issues a certificate for the key, subject and names of a
// request. An SM2 request needs an SM2 CA and becomes a TLCP signing or
// encryption certificate (by the key usage it asks for, or opts.Role),
// shaped as IssueDual shapes them; an RSA or ECDSA request needs an RSA or
// ECDSA CA and becomes a TLS certificate. It returns the certificate and
// its role.
func (ca *CA) SignCSR(csr *smx509.CertificateRequest, opts SignOptions) (*smx509.Certificate, string, error) {
	issuer, issuerKey, err := ca.issuer()
	if err != nil {
		return nil, "", err
	}
	caSM2 := ca.KeyAlgorithm().IsSM2()
	keySM2 := sm2.IsSM2PublicKey(csr.PublicKey)
	switch {
	case keySM2 && !caSM2:
		return nil, "", fmt.Errorf("the request has an SM2 key, which a TLCP certificate from an SM2 CA needs; this CA is %s (make an SM2 CA with gmgate cert init-ca)", ca.KeyAlgorithm())
	case !keySM2 && caSM2:
		return nil, "", fmt.Errorf("the request has a %s key, for the TLS side; TLS clients cannot verify an SM2 CA's signature: sign it with an ECDSA or RSA CA (gmgate cert init-ca --key-type ecdsa-p256)", certinfo.DescribePublicKey(csr.PublicKey))
	}
	requested, err := requestedKeyUsage(csr)
	if err != nil {
		return nil, "", err
	}
	role := RoleTLS
	if keySM2 {
		if role, err = tlcpRole(requested, opts.Role); err != nil {
			return nil, "", err
		}
	} else if opts.Role != "" && opts.Role != RoleTLS {
		return nil, "", fmt.Errorf("the request has a %s key, which makes a TLS certificate; --usage %s is for SM2 requests", certinfo.DescribePublicKey(csr.PublicKey), opts.Role)
	}
	issue := IssueOptions{
		RawSubject:     csr.RawSubject,
		DNSNames:       csr.DNSNames,
		IPAddresses:    csr.IPAddresses,
		EmailAddresses: csr.EmailAddresses,
		URIs:           csr.URIs,
		Validity:       opts.Validity,
		Now:            opts.Now,
	}
	if len(csr.Subject.Names) == 0 {
		// An empty subject: IssueOptions takes the first name as CN.
		issue.RawSubject = nil
	}
	tmpl, err := issue.template(issuer)
	if err != nil {
		return nil, "", err
	}
	switch role {
	case RoleSign:
		tmpl.KeyUsage = SignKeyUsage
	case RoleEnc:
		tmpl.KeyUsage = EncKeyUsage
	default:
		tmpl.KeyUsage = tlsKeyUsage(csr.PublicKey)
	}
	if tmpl.SerialNumber, err = randomSerial(); err != nil {
		return nil, "", err
	}
	cert, err := createCertificate(tmpl, issuer, csr.PublicKey, issuerKey)
	if err != nil {
		return nil, "", err
	}
	return cert, role, nil
}

// tlcpRole decides whether an SM2 request becomes the signing or the
// encryption certificate.
func tlcpRole(requested smx509.KeyUsage, given string) (string, error) {
	asks := ""
	switch {
	case requested&smx509.KeyUsageDigitalSignature != 0 && requested&EncKeyUsage != 0:
		asks = "both"
	case requested&smx509.KeyUsageDigitalSignature != 0:
		asks = RoleSign
	case requested&EncKeyUsage != 0:
		asks = RoleEnc
	}
	switch given {
	case "":
		switch asks {
		case RoleSign, RoleEnc:
			return asks, nil
		case "both":
			return "", fmt.Errorf("the request asks for key usage %s, signing and encryption at once; TLCP keeps them apart: give --usage sign or --usage enc", certinfo.KeyUsageString(requested))
		}
		return "", errors.New("the request asks for no key usage, so it does not say whether it is for the signing or the encryption certificate: give --usage sign or --usage enc")
	case RoleSign, RoleEnc:
		if asks != "" && asks != "both" && asks != given {
			return "", fmt.Errorf("the request asks for key usage %s (the %s certificate), not for --usage %s; give the other request, or leave --usage out", certinfo.KeyUsageString(requested), asks, given)
		}
		return given, nil
	}
	return "", fmt.Errorf("--usage %q: give sign or enc", given)
}

// requestedKeyUsage reads the KeyUsage extension a request asks for; 0
// when it asks for none.
func requestedKeyUsage(csr *smx509.CertificateRequest) (smx509.KeyUsage, error) {
	for _, e := range csr.Extensions {
		if !e.Id.Equal(oidExtKeyUsage) {
			continue
		}
		var bits asn1.BitString
		if rest, err := asn1.Unmarshal(e.Value, &bits); err != nil || len(rest) > 0 {
			return 0, errors.New("the request's key usage extension is malformed")
		}
		var ku smx509.KeyUsage
		for i := 0; i < 9; i++ {
			if bits.At(i) != 0 {
				ku |= 1 << uint(i)
			}
		}
		return ku, nil
	}
	return 0, nil
}
