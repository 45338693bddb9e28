package pki

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs/internal/certinfo"
	"github.com/gmgate/gmgate/certs/internal/pemfile"
	"github.com/gmgate/gmgate/tlcp"
)

// IssueOptions describe the identity of a leaf certificate (or pair).
type IssueOptions struct {
	// Subject of the certificate; CommonName defaults to the first DNS
	// name (or IP address).
	Subject pkix.Name
	// RawSubject, when set, is the DER subject used verbatim (migrate
	// keeps an existing certificate's subject byte for byte).
	RawSubject []byte
	// DNSNames, IPAddresses, EmailAddresses and URIs go into the
	// subjectAltName extension.
	DNSNames       []string
	IPAddresses    []net.IP
	EmailAddresses []string
	URIs           []*url.URL
	// Validity of the certificate; DefaultLeafValidity when zero, at most
	// MaxValidity and never past the issuer's NotAfter.
	Validity time.Duration
	// KeyAlgorithm is the key type of a TLS certificate (IssueTLS); by
	// default ecdsa-p256 from an ECDSA CA and rsa-2048 from an RSA CA.
	// TLCP pairs are always SM2.
	KeyAlgorithm KeyAlgorithm
	// Now returns the current time; time.Now when nil.
	Now func() time.Time
}

func (o *IssueOptions) rawSubject() ([]byte, error) {
	if len(o.RawSubject) > 0 {
		var rdn pkix.RDNSequence
		if rest, err := asn1.Unmarshal(o.RawSubject, &rdn); err != nil || len(rest) > 0 {
			return nil, errors.New("RawSubject is not a DER distinguished name")
		}
		return o.RawSubject, nil
	}
	subject := o.Subject
	if subject.CommonName == "" {
		switch {
		case len(o.DNSNames) > 0:
			subject.CommonName = o.DNSNames[0]
		case len(o.IPAddresses) > 0:
			subject.CommonName = o.IPAddresses[0].String()
		case len(o.EmailAddresses) > 0:
			subject.CommonName = o.EmailAddresses[0]
		}
	}
	if len(subject.ToRDNSequence()) == 0 {
		return nil, errors.New("the certificate needs a subject or at least one DNS name or IP address")
	}
	return asn1.Marshal(subject.ToRDNSequence())
}

func (o *IssueOptions) validate() error {
	if len(o.DNSNames)+len(o.IPAddresses)+len(o.EmailAddresses)+len(o.URIs) == 0 && len(o.RawSubject) == 0 && o.Subject.CommonName == "" {
		return errors.New("no names: give at least one DNS name (--dns) or IP address (--ip)")
	}
	for _, d := range o.DNSNames {
		if d == "" || len(d) > 253 || net.ParseIP(d) != nil {
			return fmt.Errorf("%q is not a DNS name (IP addresses go in --ip)", d)
		}
		if why := dnsNameProblem(d); why != "" {
			return fmt.Errorf("DNS name %q %s; a DNS name is labels of letters, digits and hyphens joined by dots, with a wildcard (*) only as the whole first label, and names in other scripts in their IDNA form (xn--...)", d, why)
		}
	}
	return nil
}

// dnsNameProblem says what makes d no DNS name a certificate can carry;
// "" when it is one. Underscores pass, as crypto/x509's verification
// takes them in names some private networks use.
func dnsNameProblem(d string) string {
	if strings.HasSuffix(d, ".") {
		return "ends with a dot: drop it"
	}
	labels := strings.Split(d, ".")
	for i, label := range labels {
		switch {
		case label == "":
			return "has an empty label (two dots in a row, or a leading dot)"
		case label == "*" && i == 0 && len(labels) > 1:
			continue
		case strings.Contains(label, "*"):
			return "has a wildcard that is not the whole first label"
		case len(label) > 63:
			return fmt.Sprintf("has a label of %d characters (at most 63)", len(label))
		case label[0] == '-' || label[len(label)-1] == '-':
			return fmt.Sprintf("has a label %q that starts or ends with a hyphen", label)
		}
		for _, r := range label {
			switch {
			case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			case r > '~':
				return fmt.Sprintf("has %q, a character outside ASCII", r)
			default:
				return fmt.Sprintf("has %q, which a DNS name cannot hold", r)
			}
		}
	}
	return ""
}

// template builds a leaf template; the subject DER and the SANs come from
// the same options, so the two certificates of a pair carry the same
// bytes.
func (o *IssueOptions) template(issuer *smx509.Certificate) (*smx509.Certificate, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	validity, err := checkValidity(o.Validity, DefaultLeafValidity)
	if err != nil {
		return nil, err
	}
	raw, err := o.rawSubject()
	if err != nil {
		return nil, err
	}
	t := certinfo.Now(o.Now)
	notBefore := t.Add(-backdate)
	notAfter := notBefore.Add(validity)
	if issuer != nil {
		if !t.Before(issuer.NotAfter) {
			return nil, fmt.Errorf("the issuing CA %q expired on %s; make a new CA", issuer.Subject.CommonName, issuer.NotAfter.UTC().Format(time.RFC3339))
		}
		if notAfter.After(issuer.NotAfter) {
			notAfter = issuer.NotAfter
		}
		if notBefore.Before(issuer.NotBefore) {
			notBefore = issuer.NotBefore
		}
	}
	return &smx509.Certificate{
		RawSubject:     raw,
		DNSNames:       o.DNSNames,
		IPAddresses:    o.IPAddresses,
		EmailAddresses: o.EmailAddresses,
		URIs:           o.URIs,
		NotBefore:      notBefore,
		NotAfter:       notAfter,
		ExtKeyUsage:    []smx509.ExtKeyUsage{smx509.ExtKeyUsageServerAuth, smx509.ExtKeyUsageClientAuth},
		// BasicConstraintsValid stays false: strict peers reject an empty
		// BasicConstraints extension on end-entity certificates.
	}, nil
}

// Dual is a TLCP identity: a signing and an encryption certificate with
// their keys, and the CA certificates that go with them.
type Dual struct {
	SignCert *smx509.Certificate
	SignKey  *sm2.PrivateKey
	EncCert  *smx509.Certificate
	EncKey   *sm2.PrivateKey
	// Chain holds the intermediate CA certificates sent after each leaf.
	Chain []*smx509.Certificate
	// Root is the CA root that clients trust.
	Root *smx509.Certificate
}

// IssueDual issues a signing certificate (digitalSignature,
// nonRepudiation) and an encryption certificate (keyEncipherment,
// dataEncipherment, keyAgreement) for the same subject and names, each
// with a fresh SM2 key. The CA must be an SM2 CA.
func (ca *CA) IssueDual(opts IssueOptions) (*Dual, error) {
	issuer, issuerKey, err := ca.issuer()
	if err != nil {
		return nil, err
	}
	if alg := ca.KeyAlgorithm(); !alg.IsSM2() {
		return nil, fmt.Errorf("TLCP certificates need an SM2 CA; this CA is %s, which issues TLS certificates (IssueTLS); make an SM2 CA with gmgate cert init-ca", alg)
	}
	tmpl, err := opts.template(issuer)
	if err != nil {
		return nil, err
	}
	d := &Dual{Chain: ca.Chain(), Root: ca.Root}
	d.SignCert, d.SignKey, err = issueLeaf(tmpl, SignKeyUsage, issuer, issuerKey)
	if err != nil {
		return nil, fmt.Errorf("issuing the signing certificate: %w", err)
	}
	d.EncCert, d.EncKey, err = issueLeaf(tmpl, EncKeyUsage, issuer, issuerKey)
	if err != nil {
		return nil, fmt.Errorf("issuing the encryption certificate: %w", err)
	}
	return d, nil
}

func issueLeaf(base *smx509.Certificate, ku smx509.KeyUsage, issuer *smx509.Certificate, issuerKey crypto.Signer) (*smx509.Certificate, *sm2.PrivateKey, error) {
	key, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := *base
	tmpl.KeyUsage = ku
	if tmpl.SerialNumber, err = randomSerial(); err != nil {
		return nil, nil, err
	}
	cert, err := createCertificate(&tmpl, issuer, &key.PublicKey, issuerKey)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// Certificate returns the pair as a tlcp.Certificate (leaves followed by
// the chain).
func (d *Dual) Certificate() *tlcp.Certificate {
	c := &tlcp.Certificate{
		SignCertificate: [][]byte{d.SignCert.Raw},
		SignKey:         d.SignKey,
		EncCertificate:  [][]byte{d.EncCert.Raw},
		EncKey:          d.EncKey,
		SignLeaf:        d.SignCert,
		EncLeaf:         d.EncCert,
	}
	for _, ch := range d.Chain {
		c.SignCertificate = append(c.SignCertificate, ch.Raw)
		c.EncCertificate = append(c.EncCertificate, ch.Raw)
	}
	return c
}

// DualFiles are the paths of a written pair.
type DualFiles struct {
	SignCert, SignKey, EncCert, EncKey string
	// CACert is the root certificate, for clients and gmgate cert verify.
	CACert string
}

// DualFileNames returns the paths Write uses for name in dir:
// NAME.sign.crt, NAME.sign.key, NAME.enc.crt, NAME.enc.key and ca.crt.
func DualFileNames(dir, name string) DualFiles {
	return DualFiles{
		SignCert: filepath.Join(dir, name+".sign.crt"),
		SignKey:  filepath.Join(dir, name+".sign.key"),
		EncCert:  filepath.Join(dir, name+".enc.crt"),
		EncKey:   filepath.Join(dir, name+".enc.key"),
		CACert:   filepath.Join(dir, CACertFile),
	}
}

// Write stores the pair in dir (see DualFileNames): each certificate file
// holds the leaf followed by the chain; keys are written 0600, encrypted
// as enc says (nil: not encrypted).
func (d *Dual) Write(dir, name string, enc *KeyEncryption) (DualFiles, error) {
	f := DualFileNames(dir, name)
	if err := pemfile.WriteCertFile(f.SignCert, append([]*smx509.Certificate{d.SignCert}, d.Chain...)...); err != nil {
		return f, err
	}
	if err := pemfile.WriteKeyFile(f.SignKey, d.SignKey, enc); err != nil {
		return f, err
	}
	if err := pemfile.WriteCertFile(f.EncCert, append([]*smx509.Certificate{d.EncCert}, d.Chain...)...); err != nil {
		return f, err
	}
	if err := pemfile.WriteKeyFile(f.EncKey, d.EncKey, enc); err != nil {
		return f, err
	}
	if d.Root != nil {
		if err := pemfile.WriteCertFile(f.CACert, d.Root); err != nil {
			return f, err
		}
	}
	return f, nil
}

// Leaf is a single certificate with its key, for the TLS side.
type Leaf struct {
	Cert  *smx509.Certificate
	Key   crypto.Signer
	Chain []*smx509.Certificate
	Root  *smx509.Certificate
}

// IssueTLS issues a server/client certificate for the TLS side, with a
// key of opts.KeyAlgorithm (ECDSA or RSA). The CA must be an ECDSA or RSA
// CA (NewCA with such a KeyAlgorithm): TLS clients cannot verify SM2
// signatures.
func (ca *CA) IssueTLS(opts IssueOptions) (*Leaf, error) {
	issuer, issuerKey, err := ca.issuer()
	if err != nil {
		return nil, err
	}
	caAlg := ca.KeyAlgorithm()
	if caAlg.IsSM2() {
		return nil, errors.New("TLS certificates need an ECDSA or RSA CA (TLS clients cannot verify SM2 signatures); make one with gmgate cert init-ca --key-type ecdsa-p256")
	}
	alg := opts.KeyAlgorithm
	switch {
	case alg.IsSM2() && opts.KeyAlgorithm != "":
		return nil, errors.New("a TLS certificate cannot have an SM2 key; TLCP pairs come from an SM2 CA")
	case alg == "" && caAlg.family() == "RSA":
		alg = KeyRSA2048
	case alg == "":
		alg = KeyECDSAP256
	}
	tmpl, err := opts.template(issuer)
	if err != nil {
		return nil, err
	}
	key, err := generateKey(alg)
	if err != nil {
		return nil, err
	}
	tmpl.KeyUsage = tlsKeyUsage(key.Public())
	if tmpl.SerialNumber, err = randomSerial(); err != nil {
		return nil, err
	}
	cert, err := createCertificate(tmpl, issuer, key.Public(), issuerKey)
	if err != nil {
		return nil, err
	}
	return &Leaf{Cert: cert, Key: key, Chain: ca.Chain(), Root: ca.Root}, nil
}

// tlsKeyUsage is the key usage of a TLS certificate: RSA keys may also
// encipher (TLS 1.2 RSA key exchange).
func tlsKeyUsage(pub crypto.PublicKey) smx509.KeyUsage {
	if _, ok := pub.(*rsa.PublicKey); ok {
		return smx509.KeyUsageDigitalSignature | smx509.KeyUsageKeyEncipherment
	}
	return smx509.KeyUsageDigitalSignature
}

// TLSCertificate returns the leaf as a crypto/tls certificate.
func (l *Leaf) TLSCertificate() (*tls.Certificate, error) {
	c := &tls.Certificate{PrivateKey: l.Key, Certificate: [][]byte{l.Cert.Raw}}
	for _, ch := range l.Chain {
		c.Certificate = append(c.Certificate, ch.Raw)
	}
	leaf, err := x509.ParseCertificate(l.Cert.Raw)
	if err != nil {
		return nil, err
	}
	c.Leaf = leaf
	return c, nil
}

// Write stores the leaf (followed by its chain) as NAME.crt and its key as
// NAME.key (0600) in dir, and returns both paths.
func (l *Leaf) Write(dir, name string, enc *KeyEncryption) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := pemfile.WriteCertFile(certFile, append([]*smx509.Certificate{l.Cert}, l.Chain...)...); err != nil {
		return certFile, keyFile, err
	}
	return certFile, keyFile, pemfile.WriteKeyFile(keyFile, l.Key, enc)
}

// DualCSR is a pair of certificate requests for an external GM CA, with
// the keys they were made for.
type DualCSR struct {
	SignCSR, EncCSR *smx509.CertificateRequest
	SignKey, EncKey *sm2.PrivateKey
}

var (
	oidExtKeyUsage    = asn1.ObjectIdentifier{2, 5, 29, 15}
	oidExtExtKeyUsage = asn1.ObjectIdentifier{2, 5, 29, 37}
	oidServerAuth     = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 3, 1}
	oidClientAuth     = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 3, 2}
)

// keyUsageExtension encodes a KeyUsage extension as smx509 would.
func keyUsageExtension(ku smx509.KeyUsage) (pkix.Extension, error) {
	var a [2]byte
	a[0] = reverseBits(byte(ku))
	a[1] = reverseBits(byte(ku >> 8))
	l := 1
	if a[1] != 0 {
		l = 2
	}
	bits := a[:l]
	bitLen := len(bits) * 8
	for i := 0; i < 8; i++ {
		if bits[len(bits)-1]&(1<<i) != 0 {
			break
		}
		bitLen--
	}
	v, err := asn1.Marshal(asn1.BitString{Bytes: bits, BitLength: bitLen})
	return pkix.Extension{Id: oidExtKeyUsage, Critical: true, Value: v}, err
}

func reverseBits(b byte) byte {
	var r byte
	for i := 0; i < 8; i++ {
		r = r<<1 | b&1
		b >>= 1
	}
	return r
}

// NewDualCSR makes two SM2 keys and a certificate request for each: the
// signing request asks for digitalSignature and nonRepudiation, the
// encryption request for keyEncipherment, dataEncipherment and
// keyAgreement; both ask for serverAuth and clientAuth and carry the same
// subject and names.
func NewDualCSR(opts IssueOptions) (*DualCSR, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	raw, err := opts.rawSubject()
	if err != nil {
		return nil, err
	}
	eku, err := asn1.Marshal([]asn1.ObjectIdentifier{oidServerAuth, oidClientAuth})
	if err != nil {
		return nil, err
	}
	make1 := func(ku smx509.KeyUsage) (*smx509.CertificateRequest, *sm2.PrivateKey, error) {
		key, err := sm2.GenerateKey(rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		kuExt, err := keyUsageExtension(ku)
		if err != nil {
			return nil, nil, err
		}
		tmpl := &smx509.CertificateRequest{
			RawSubject:      raw,
			DNSNames:        opts.DNSNames,
			IPAddresses:     opts.IPAddresses,
			EmailAddresses:  opts.EmailAddresses,
			URIs:            opts.URIs,
			ExtraExtensions: []pkix.Extension{kuExt, {Id: oidExtExtKeyUsage, Value: eku}},
		}
		der, err := smx509.CreateCertificateRequest(rand.Reader, tmpl, key)
		if err != nil {
			return nil, nil, err
		}
		csr, err := smx509.ParseCertificateRequest(der)
		return csr, key, err
	}
	var c DualCSR
	if c.SignCSR, c.SignKey, err = make1(SignKeyUsage); err != nil {
		return nil, err
	}
	if c.EncCSR, c.EncKey, err = make1(EncKeyUsage); err != nil {
		return nil, err
	}
	return &c, nil
}

// CSRFiles are the paths of a written request pair.
type CSRFiles struct {
	SignCSR, SignKey, EncCSR, EncKey string
}

// csrFileNames returns the paths DualCSR.Write uses for name in dir.
func csrFileNames(dir, name string) CSRFiles {
	return CSRFiles{
		SignCSR: filepath.Join(dir, name+".sign.csr"),
		SignKey: filepath.Join(dir, name+".sign.key"),
		EncCSR:  filepath.Join(dir, name+".enc.csr"),
		EncKey:  filepath.Join(dir, name+".enc.key"),
	}
}

// Write stores the requests as NAME.sign.csr and NAME.enc.csr and the keys
// as NAME.sign.key and NAME.enc.key (0600) in dir.
func (c *DualCSR) Write(dir, name string, enc *KeyEncryption) (CSRFiles, error) {
	f := csrFileNames(dir, name)
	for _, w := range []struct {
		path string
		csr  *smx509.CertificateRequest
		key  *sm2.PrivateKey
		kp   string
	}{{f.SignCSR, c.SignCSR, c.SignKey, f.SignKey}, {f.EncCSR, c.EncCSR, c.EncKey, f.EncKey}} {
		if err := pemfile.WriteFileAtomic(w.path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: w.csr.Raw}), 0o644); err != nil {
			return f, err
		}
		if err := pemfile.WriteKeyFile(w.kp, w.key, enc); err != nil {
			return f, err
		}
	}
	return f, nil
}

// publicKeysEqual compares two public keys by their SubjectPublicKeyInfo
// encoding, which works across key wrappers and curve representations.
