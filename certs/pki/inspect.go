package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/accel"
	"github.com/gmgate/gmgate/certs/internal/certinfo"
	"github.com/gmgate/gmgate/certs/internal/pemfile"
	"github.com/gmgate/gmgate/internal/keyenc"
)

// Severity grades an inspection finding.
type Severity string

const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
)

// Finding is a problem found by Inspect.
type Finding struct {
	Severity Severity
	Message  string
}

// InspectedItem is one thing found in a file: a certificate, a key or a
// certificate request.
type InspectedItem struct {
	File  string
	Index int
	// Kind is "certificate", "private key", "encrypted private key" or
	// "certificate request".
	Kind     string
	Summary  string
	Fields   [][2]string
	Findings []Finding

	cert   *smx509.Certificate
	pub    crypto.PublicKey
	isKey  bool
	matchd bool
}

func (it *InspectedItem) add(name, value string) {
	it.Fields = append(it.Fields, [2]string{name, value})
}

func (it *InspectedItem) flag(sev Severity, format string, args ...any) {
	it.Findings = append(it.Findings, Finding{Severity: sev, Message: fmt.Sprintf(format, args...)})
}

// InspectReport is the result of Inspect.
type InspectReport struct {
	Items []*InspectedItem
}

// HasErrors reports whether any item has an error finding.
func (r *InspectReport) HasErrors() bool {
	for _, it := range r.Items {
		for _, f := range it.Findings {
			if f.Severity == SeverityError {
				return true
			}
		}
	}
	return false
}

// InspectOptions adjust Inspect.
type InspectOptions struct {
	// Roots are trusted CA certificates used to check signatures and find
	// missing intermediates.
	Roots []*smx509.Certificate
	// KeyPassword decrypts encrypted keys (they are described without it).
	KeyPassword []byte
	Now         func() time.Time
}

// Inspect reads certificate, key and request files and describes each
// item, flagging expired or not-yet-valid certificates, wrong usages,
// keys that match none of the certificates given, missing intermediates,
// and bad signatures (recognising the empty SM2 user ID of OpenSSL 3.0).
// Unreadable files become error findings, not a failure of the whole
// report.
func Inspect(files []string, opts InspectOptions) *InspectReport {
	r := &InspectReport{}
	for _, f := range files {
		r.Items = append(r.Items, inspectFile(f, opts)...)
	}
	var certs []*smx509.Certificate
	for _, it := range r.Items {
		if it.cert != nil {
			certs = append(certs, it.cert)
		}
	}
	t := certinfo.Now(opts.Now)
	for i, it := range r.Items {
		if it.cert != nil {
			var next *smx509.Certificate
			if i+1 < len(r.Items) && r.Items[i+1].File == it.File && r.Items[i+1].cert != nil {
				next = r.Items[i+1].cert
			}
			checkCertificate(it, t, next, certs, opts.Roots)
		}
	}
	checkKeysAndPairs(r)
	return r
}

func inspectFile(path string, opts InspectOptions) []*InspectedItem {
	data, err := pemfile.ReadSmallFile(path)
	if err != nil {
		it := &InspectedItem{File: path, Kind: "file"}
		it.flag(SeverityError, "cannot read: %v", err)
		return []*InspectedItem{it}
	}
	var items []*InspectedItem
	for i, b := range pemfile.SplitPEM(data) {
		block := b.PEM
		it := &InspectedItem{File: path, Index: i + 1}
		if block == nil {
			it.Kind = "damaged PEM block"
			it.flag(SeverityError, "%s", pemfile.DamagedPEM(i+1, b))
			items = append(items, it)
			continue
		}
		switch block.Type {
		case "CERTIFICATE", "X509 CERTIFICATE", "TRUSTED CERTIFICATE":
			describeCertificate(it, block.Bytes)
		case "CERTIFICATE REQUEST", "NEW CERTIFICATE REQUEST":
			describeCSR(it, block.Bytes)
		case "ENCRYPTED PRIVATE KEY":
			describeEncryptedKey(it, block, opts.KeyPassword)
		case "PRIVATE KEY", "EC PRIVATE KEY", "SM2 PRIVATE KEY", "RSA PRIVATE KEY":
			describeKey(it, pem.EncodeToMemory(block), nil)
		default:
			it.Kind = block.Type
			it.Summary = "PEM block " + block.Type + " (not inspected)"
		}
		items = append(items, it)
	}
	if len(items) == 0 {
		it := &InspectedItem{File: path, Index: 1}
		if c, err := smx509.ParseCertificate(data); err == nil {
			describeCertificate(it, c.Raw)
			it.add("encoding", "DER")
		} else {
			it.Kind = "file"
			it.flag(SeverityError, `not a PEM file (no "-----BEGIN ...-----" block) and not a DER certificate; give a PEM certificate, key or request`)
		}
		items = append(items, it)
	}
	return items
}

func fingerprint(sum []byte) string {
	h := strings.ToUpper(hex.EncodeToString(sum))
	var b strings.Builder
	for i := 0; i < len(h); i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(h[i : i+2])
	}
	return b.String()
}

// certRole names what a certificate is for, judged by its key usage.
func certRole(c *smx509.Certificate) string {
	sm2Key := sm2.IsSM2PublicKey(c.PublicKey)
	switch {
	case c.IsCA:
		if c.CheckSignatureFrom(c) == nil || string(c.RawIssuer) == string(c.RawSubject) {
			return "root CA certificate"
		}
		return "intermediate CA certificate"
	case !sm2Key:
		return "TLS certificate"
	case certinfo.LooksLikeSign(c):
		return "SM2 signing certificate"
	case certinfo.LooksLikeEnc(c):
		return "SM2 encryption certificate"
	}
	return "SM2 certificate"
}

func describeCertificate(it *InspectedItem, der []byte) {
	it.Kind = "certificate"
	c, err := smx509.ParseCertificate(der)
	if err != nil {
		it.flag(SeverityError, "cannot parse the certificate: %v", err)
		return
	}
	it.cert, it.pub = c, c.PublicKey
	it.Summary = certRole(c)
	it.add("subject", c.Subject.String())
	it.add("issuer", c.Issuer.String())
	it.add("serial", fmt.Sprintf("%X (%d bytes)", c.SerialNumber, len(c.SerialNumber.Bytes())))
	if s := certinfo.SANString(c); s != "" {
		it.add("names", s)
	}
	it.add("validity", fmt.Sprintf("%s to %s", c.NotBefore.UTC().Format(time.RFC3339), c.NotAfter.UTC().Format(time.RFC3339)))
	it.add("key", certinfo.DescribePublicKey(c.PublicKey))
	it.add("signature", c.SignatureAlgorithm.String())
	it.add("key usage", certinfo.KeyUsageString(c.KeyUsage))
	if len(c.ExtKeyUsage) > 0 {
		it.add("ext key usage", certinfo.EKUString(c.ExtKeyUsage))
	}
	if c.BasicConstraintsValid {
		it.add("basic constraints", fmt.Sprintf("CA:%v", c.IsCA))
	}
	s256 := sha256.Sum256(c.Raw)
	it.add("sha256", fingerprint(s256[:]))
	s3 := sm3.Sum(c.Raw)
	it.add("sm3", fingerprint(s3[:]))
}

func checkCertificate(it *InspectedItem, t time.Time, next *smx509.Certificate, all, roots []*smx509.Certificate) {
	c := it.cert
	switch {
	case t.After(c.NotAfter):
		it.flag(SeverityError, "expired on %s (%s ago); renew it", c.NotAfter.UTC().Format(time.RFC3339), certinfo.Ago(t.Sub(c.NotAfter)))
	case t.Before(c.NotBefore):
		it.flag(SeverityError, "not yet valid: valid from %s; check the clock of the machine that issued it", c.NotBefore.UTC().Format(time.RFC3339))
	default:
		it.add("expires in", certinfo.Ago(c.NotAfter.Sub(t)))
	}
	sm2Key := sm2.IsSM2PublicKey(c.PublicKey)
	if !c.IsCA {
		if c.KeyUsage != 0 && c.KeyUsage&(smx509.KeyUsageDigitalSignature|EncKeyUsage) == 0 {
			it.flag(SeverityError, "wrong usage: key usage %s allows neither signing (digitalSignature) nor encryption; it cannot serve TLCP or TLS", certinfo.KeyUsageString(c.KeyUsage))
		}
		if c.KeyUsage&(smx509.KeyUsageCertSign|smx509.KeyUsageCRLSign) != 0 && sm2Key {
			it.flag(SeverityWarning, "an end-entity certificate with keyCertSign/cRLSign; GmSSL peers reject it")
		}
		if sm2Key && c.KeyUsage&smx509.KeyUsageDigitalSignature != 0 && c.KeyUsage&EncKeyUsage != 0 {
			it.flag(SeverityWarning, "key usage %s mixes signing and encryption; TLCP uses separate signing and encryption certificates", certinfo.KeyUsageString(c.KeyUsage))
		}
		if len(c.ExtKeyUsage) > 0 && !certinfo.HasEKU(c, smx509.ExtKeyUsageServerAuth) && !certinfo.HasEKU(c, smx509.ExtKeyUsageAny) {
			if certinfo.HasEKU(c, smx509.ExtKeyUsageClientAuth) {
				it.flag(SeverityWarning, "extended key usage is clientAuth only; it cannot be a server certificate")
			} else {
				it.flag(SeverityError, "wrong usage: extended key usage %s has neither serverAuth nor clientAuth", certinfo.EKUString(c.ExtKeyUsage))
			}
		}
		if c.BasicConstraintsValid && sm2Key {
			it.flag(SeverityWarning, "an end-entity certificate with a BasicConstraints extension; GmSSL peers reject it")
		}
	}
	if n := len(c.SerialNumber.Bytes()); n < 4 {
		it.flag(SeverityWarning, "serial number is %d bytes; GmSSL peers want at least 4", n)
	}
	if c.NotAfter.Sub(c.NotBefore) > MaxValidity {
		it.flag(SeverityWarning, "valid for %d days; GmSSL peers reject more than %d days", int(c.NotAfter.Sub(c.NotBefore).Hours()/24), int(MaxValidity.Hours()/24))
	}
	checkIssuerSignature(it, next, all, roots)
}

// checkIssuerSignature finds the issuer (self, the next certificate in the
// file, any other certificate given, the roots) and checks the signature.
func checkIssuerSignature(it *InspectedItem, next *smx509.Certificate, all, roots []*smx509.Certificate) {
	c := it.cert
	var candidates []*smx509.Certificate
	if string(c.RawIssuer) == string(c.RawSubject) {
		candidates = append(candidates, c)
	}
	if next != nil {
		candidates = append(candidates, next)
	}
	candidates = append(candidates, roots...)
	candidates = append(candidates, all...)
	var issuer *smx509.Certificate
	for _, cand := range candidates {
		if string(cand.RawSubject) == string(c.RawIssuer) {
			issuer = cand
			if signatureVerifies(c, cand) {
				where := "the certificate itself (self-signed)"
				if cand != c {
					where = fmt.Sprintf("%q", cand.Subject.String())
				}
				it.add("signature check", "verified by "+where)
				return
			}
		}
	}
	if issuer == nil {
		if len(roots) > 0 {
			it.flag(SeverityError, "unknown issuer: the issuer %q is neither among the files given nor a trusted CA; if it is a root CA, the CA given with --ca is not it: give that CA; if it is an intermediate CA, append its certificate after this certificate in its file", c.Issuer.String())
		} else {
			it.flag(SeverityWarning, "issuer %q is not among the files given, so the chain and signature were not checked (give the CA with --ca; if the issuer is an intermediate, append it to this file)", c.Issuer.String())
		}
		return
	}
	if certinfo.SignedWithEmptyID(c, issuer) {
		it.flag(SeverityError, "SM2 signature signed with an empty user ID: %s", certinfo.EmptyIDAdvice)
		return
	}
	it.flag(SeverityError, "bad signature: it does not verify with the key of its issuer %q (wrong or replaced CA certificate?)", issuer.Subject.String())
}

// signatureVerifies checks c's signature with issuer's key. A
// self-signed end-entity certificate (CA:FALSE, as servers and clients
// pin) is checked with its own key: CheckSignatureFrom refuses a parent
// that is not a CA, which is a rule for chains, not for the signature.
func signatureVerifies(c, issuer *smx509.Certificate) bool {
	if c == issuer || string(c.Raw) == string(issuer.Raw) {
		return c.CheckSignature(c.SignatureAlgorithm, c.RawTBSCertificate, c.Signature) == nil
	}
	return c.CheckSignatureFrom(issuer) == nil
}

func describeCSR(it *InspectedItem, der []byte) {
	it.Kind = "certificate request"
	csr, err := smx509.ParseCertificateRequest(der)
	if err != nil {
		it.flag(SeverityError, "cannot parse the request: %v", err)
		return
	}
	it.Summary = "certificate request"
	it.pub = csr.PublicKey
	it.add("subject", csr.Subject.String())
	var names []string
	for _, d := range csr.DNSNames {
		names = append(names, "DNS:"+d)
	}
	for _, ip := range csr.IPAddresses {
		names = append(names, "IP:"+ip.String())
	}
	if len(names) > 0 {
		it.add("names", strings.Join(names, ", "))
	}
	it.add("key", certinfo.DescribePublicKey(csr.PublicKey))
	it.add("signature", csr.SignatureAlgorithm.String())
	if err := csr.CheckSignature(); err != nil {
		pub, ok := csr.PublicKey.(*ecdsa.PublicKey)
		if ok && csr.SignatureAlgorithm == smx509.SM2WithSM3 && certinfo.VerifySM2WithID(pub, nil, csr.RawTBSCertificateRequest, csr.Signature) {
			it.flag(SeverityError, "SM2 signature signed with an empty user ID: %s", certinfo.EmptyIDAdvice)
		} else {
			it.flag(SeverityError, "bad self-signature: %v", err)
		}
	} else {
		it.add("signature check", "verified")
	}
}

func describeEncryptedKey(it *InspectedItem, block *pem.Block, password []byte) {
	it.Kind = "encrypted private key"
	info, err := keyenc.Describe(block.Bytes)
	if err != nil {
		it.flag(SeverityError, "%v", err)
		return
	}
	it.add("encryption", info.String())
	readBy := info.ReadBy()
	if len(readBy) > 0 {
		it.add("readable by", strings.Join(readBy, ", "))
	}
	if !slices.Contains(readBy, "gmgate") {
		// Say what is missing even without the password.
		_, err := keyenc.Decrypt(block.Bytes, nil)
		it.flag(SeverityError, "gmgate cannot decrypt this key: %v; it reads %s", err, keyenc.Supported)
		return
	}
	if len(password) == 0 {
		it.Summary = "encrypted private key (give --key-password-file to check it)"
		return
	}
	describeKey(it, pem.EncodeToMemory(block), password)
	it.Kind = "encrypted private key"
}

func describeKey(it *InspectedItem, data, password []byte) {
	it.Kind = "private key"
	it.isKey = true
	k, err := accel.ParsePEMPrivateKey(data, password)
	if err != nil {
		it.flag(SeverityError, "cannot read the key: %v", err)
		return
	}
	it.pub = k.Public()
	it.Summary = certinfo.DescribePublicKey(it.pub) + " private key"
	it.add("key", certinfo.DescribePublicKey(it.pub))
}

// checkKeysAndPairs matches keys to certificates and compares SM2 pairs.
func checkKeysAndPairs(r *InspectReport) {
	var certItems []*InspectedItem
	for _, it := range r.Items {
		if it.cert != nil {
			certItems = append(certItems, it)
		}
	}
	for _, it := range r.Items {
		if !it.isKey || it.pub == nil {
			continue
		}
		for _, c := range certItems {
			if certinfo.PublicKeysEqual(it.pub, c.cert.PublicKey) {
				it.add("belongs to", fmt.Sprintf("%s certificate %d (%s)", c.File, c.Index, c.Subject()))
				c.matchd = true
				it.matchd = true
			}
		}
		if !it.matchd && len(certItems) > 0 {
			it.flag(SeverityError, "key/certificate mismatch: this key belongs to none of the certificates given; find the key generated with the certificate")
		}
	}
	var signs, encs []*InspectedItem
	for _, c := range certItems {
		switch certRole(c.cert) {
		case "SM2 signing certificate":
			signs = append(signs, c)
		case "SM2 encryption certificate":
			encs = append(encs, c)
		}
	}
	for _, s := range signs {
		e, how := partner(s, signs, encs)
		switch how {
		case pairedSubject:
			if certinfo.SANString(s.cert) != certinfo.SANString(e.cert) {
				s.flag(SeverityWarning, "the encryption certificate %s names other hosts (%s); peers that check it reject the pair", e.File, certinfo.SANString(e.cert))
			}
		case pairedOnly:
			if string(s.cert.RawSubject) != string(e.cert.RawSubject) {
				s.flag(SeverityWarning, "the encryption certificate %s has a different subject; GmSSL peers require identical subjects on the pair", e.File)
			}
			if string(s.cert.RawIssuer) != string(e.cert.RawIssuer) {
				s.flag(SeverityWarning, "the encryption certificate %s has a different issuer; GmSSL peers require the same issuer on the pair", e.File)
			}
			if certinfo.SANString(s.cert) != certinfo.SANString(e.cert) {
				s.flag(SeverityWarning, "the encryption certificate %s names other hosts (%s); peers that check it reject the pair", e.File, certinfo.SANString(e.cert))
			}
		}
	}
}

// How a signing certificate was matched with an encryption certificate.
const (
	unpaired      = iota
	pairedSubject // same issuer and subject
	pairedOnly    // the only signing and the only encryption certificate of their issuer
)

// partner finds the encryption certificate that goes with a signing
// certificate: one of the same issuer and subject; failing that, the
// only encryption certificate given when the signing certificate is the
// only one, or the only one of its issuer (the pair given, whose subjects
// or issuers differ). Several pairs from one CA are told apart by subject,
// so each is compared with its own.
func partner(s *InspectedItem, signs, encs []*InspectedItem) (*InspectedItem, int) {
	sameIssuer := func(a, b *InspectedItem) bool { return string(a.cert.RawIssuer) == string(b.cert.RawIssuer) }
	var bySubject, byIssuer []*InspectedItem
	for _, e := range encs {
		if !sameIssuer(s, e) {
			continue
		}
		byIssuer = append(byIssuer, e)
		if string(s.cert.RawSubject) == string(e.cert.RawSubject) {
			bySubject = append(bySubject, e)
		}
	}
	if len(bySubject) > 0 {
		// Prefer the one that also names the same hosts.
		for _, e := range bySubject {
			if certinfo.SANString(e.cert) == certinfo.SANString(s.cert) {
				return e, pairedSubject
			}
		}
		return bySubject[0], pairedSubject
	}
	if len(signs) == 1 && len(encs) == 1 {
		return encs[0], pairedOnly
	}
	signsOfIssuer := 0
	for _, o := range signs {
		if sameIssuer(s, o) {
			signsOfIssuer++
		}
	}
	if signsOfIssuer == 1 && len(byIssuer) == 1 {
		return byIssuer[0], pairedOnly
	}
	return nil, unpaired
}

// Subject returns the certificate's subject, or "" for other items.
func (it *InspectedItem) Subject() string {
	if it.cert == nil {
		return ""
	}
	return it.cert.Subject.String()
}

// WriteText writes the report for people.
func (r *InspectReport) WriteText(w io.Writer) error {
	var b strings.Builder
	last := ""
	for _, it := range r.Items {
		if it.File != last {
			if last != "" {
				b.WriteByte('\n')
			}
			fmt.Fprintf(&b, "%s\n", it.File)
			last = it.File
		}
		head := it.Kind
		if it.Index > 0 {
			head = fmt.Sprintf("%s %d", it.Kind, it.Index)
		}
		if it.Summary != "" && it.Summary != it.Kind {
			head += ": " + it.Summary
		}
		fmt.Fprintf(&b, "  %s\n", head)
		for _, f := range it.Fields {
			fmt.Fprintf(&b, "    %-18s %s\n", f[0]+":", f[1])
		}
		for _, f := range it.Findings {
			fmt.Fprintf(&b, "    %s: %s\n", strings.ToUpper(string(f.Severity)), f.Message)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
