package certs

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/accel"
	"github.com/gmgate/gmgate/certs/internal/certinfo"
	"github.com/gmgate/gmgate/certs/internal/chain"
	"github.com/gmgate/gmgate/internal/keyref"
	"github.com/gmgate/gmgate/tlcp"
)

// TLCPFiles name the four parts of a TLCP identity. The certificate files
// are PEM, leaf first, then the intermediates; the keys are accel key
// references (a path, file:PATH?password-env=VAR, sdf:...).
type TLCPFiles struct {
	SignCert, SignKey, EncCert, EncKey string
	// OCSPStapling staples OCSP responses about the signing certificate
	// (for TLCP clients that ask) when the store has a Stapler and the
	// certificate names a responder.
	OCSPStapling bool
}

// TLSFiles name a TLS certificate (PEM, leaf first) and its key reference.
type TLSFiles struct {
	Cert, Key string
	// OCSPStapling staples OCSP responses to the certificate when the
	// store has a Stapler and the certificate names a responder.
	OCSPStapling bool
}

// SM2Files name an SM2 certificate (PEM, leaf first) and its key
// reference that serve TLS 1.3 with the ShangMi suites: a site's tls.sm2.
type SM2Files struct {
	Cert, Key string
}

// sm2Side is the FieldError side of SM2Files: their place in a site's
// configuration.
const sm2Side = "tls.sm2"

// loadSM2Files loads an SM2 identity for TLS 1.3 with the checks of a
// TLCP signing pair (an SM2 certificate with digitalSignature, its key,
// a card key's self-test), its problems on the side tls.sm2 with the
// fields cert and key.
func loadSM2Files(f SM2Files, opts LoadOptions) (*tlcp.Certificate, []string, error) {
	opts.SignOnly = true
	if opts.Names == (FieldNames{}) {
		opts.Names = FieldNames{SignCert: "cert", SignKey: "key"}
	}
	c, warnings, err := LoadTLCPFiles(TLCPFiles{SignCert: f.Cert, SignKey: f.Key}, opts)
	for _, leaf := range joined(err) {
		var fe *FieldError
		if errors.As(leaf, &fe) {
			fe.Side = sm2Side
			switch fe.Field {
			case "sign_cert":
				fe.Field = "cert"
			case "sign_key":
				fe.Field = "key"
			}
		}
	}
	return c, warnings, err
}

// LoadOptions adjust the load-time checks.
type LoadOptions struct {
	// Roots, when set, are the trusted CA certificates: each leaf must
	// chain to one of them through the intermediates in its file, which
	// reports missing intermediates.
	Roots []*smx509.Certificate
	// Now returns the current time; time.Now when nil.
	Now func() time.Time
	// Context bounds opening keys (hardware backends); Background when nil.
	Context context.Context
	// Offline checks the certificates without opening any key: for
	// checking a configuration where its keys, passwords and devices are
	// not at hand. What it loads cannot serve.
	Offline bool
	// Names are what messages call the files; the configuration's field
	// names (sign_cert, sign_key, ...) where empty. A command passes its
	// flag names. FieldError.Field keeps the configuration's names.
	Names FieldNames
	// SignOnly allows a TLCP identity without an encryption pair (EncCert
	// and EncKey empty): a client that authenticates with its signing
	// certificate alone, which cannot use the ECDHE suites.
	SignOnly bool
}

// FieldNames name the inputs of a certificate set in messages.
type FieldNames struct {
	SignCert, SignKey, EncCert, EncKey string
	Cert, Key                          string
}

func (o *LoadOptions) names() FieldNames {
	n := o.Names
	set := func(v *string, def string) {
		if *v == "" {
			*v = def
		}
	}
	set(&n.SignCert, "sign_cert")
	set(&n.SignKey, "sign_key")
	set(&n.EncCert, "enc_cert")
	set(&n.EncKey, "enc_key")
	set(&n.Cert, "cert")
	set(&n.Key, "key")
	return n
}

func (o *LoadOptions) ctx() context.Context {
	if o.Context != nil {
		return o.Context
	}
	return context.Background()
}

// LoadTLCP loads and checks a TLCP identity (see LoadTLCPFiles).
func LoadTLCP(signCert, signKeyRef, encCert, encKeyRef string) (*tlcp.Certificate, error) {
	c, _, err := LoadTLCPFiles(TLCPFiles{SignCert: signCert, SignKey: signKeyRef, EncCert: encCert, EncKey: encKeyRef}, LoadOptions{})
	return c, err
}

// LoadTLS loads and checks a TLS certificate (see LoadTLSFiles).
func LoadTLS(cert, keyRef string) (*tls.Certificate, error) {
	c, _, err := LoadTLSFiles(TLSFiles{Cert: cert, Key: keyRef}, LoadOptions{})
	return c, err
}

// FieldError is a problem with one field of a certificate set: a
// certificate file or a key reference. LoadTLCPFiles, LoadTLSFiles and
// NewStore report every problem they find, each as a *FieldError, joined
// with errors.Join when there are several.
type FieldError struct {
	// Source is the name of the store source ("" outside a Store).
	Source string
	// Side is "tlcp" or "tls".
	Side string
	// Field is sign_cert, sign_key, enc_cert, enc_key (tlcp) or cert,
	// key (tls), whatever LoadOptions.Names the messages use; "" for a
	// problem of the pair as a whole.
	Field string
	Err   error
}

func (e *FieldError) Error() string {
	if e.Source != "" {
		return e.Source + ": " + e.Side + ": " + e.Err.Error()
	}
	return e.Err.Error()
}

func (e *FieldError) Unwrap() error { return e.Err }

// problems collects the FieldErrors of one certificate set.
type problems struct {
	side string
	errs []error
}

func (p *problems) add(field string, err error) {
	p.errs = append(p.errs, &FieldError{Side: p.side, Field: field, Err: err})
}

func (p *problems) err() error {
	switch len(p.errs) {
	case 0:
		return nil
	case 1:
		return p.errs[0]
	}
	return errors.Join(p.errs...)
}

// LoadTLCPFiles loads a TLCP identity and checks it: both certificates
// and both keys SM2; each key belongs to its certificate (and the
// sign/enc roles are not swapped); a key on a device passes
// accel.SelfTest; the signing certificate has digitalSignature and the
// encryption certificate keyEncipherment, dataEncipherment or
// keyAgreement; both are valid now; each file's chain is in order; with
// opts.Roots, both verify. Each problem names the field, the file and the
// fix; problems of independent parts (the two certificates, the two keys)
// are all reported. Warnings are problems some peers reject but the proxy
// can serve (subjects that differ between the pair, for instance).
//
// With opts.Offline the keys are not opened: the certificates are
// checked, and the result has no keys and cannot serve. With
// opts.SignOnly and no encryption pair given, the signing pair alone is
// loaded.
//
// The warnings say what loads but may fail clients (pairs whose subjects,
// issuers or names differ) or others may read (a key, password or PIN
// file with a loose mode, see keyref.LooseMode).
func LoadTLCPFiles(f TLCPFiles, opts LoadOptions) (*tlcp.Certificate, []string, error) {
	c, warnings, err := loadTLCPFiles(f, opts)
	if err != nil {
		return nil, nil, err
	}
	n := opts.names()
	return c, append(warnings, secretFileWarnings(n.SignKey, f.SignKey, n.EncKey, f.EncKey)...), nil
}

func loadTLCPFiles(f TLCPFiles, opts LoadOptions) (*tlcp.Certificate, []string, error) {
	n := opts.names()
	if opts.SignOnly && strings.TrimSpace(f.EncCert) == "" && strings.TrimSpace(f.EncKey) == "" {
		return loadSignOnly(f, opts, n)
	}
	probs := &problems{side: "tlcp"}
	signChain := loadSM2Chain(probs, "sign_cert", n.SignCert, f.SignCert, opts)
	encChain := loadSM2Chain(probs, "enc_cert", n.EncCert, f.EncCert, opts)
	if signChain != nil && encChain != nil && string(signChain[0].Raw) == string(encChain[0].Raw) {
		probs.add("enc_cert", fmt.Errorf("%s %s is the same certificate as %s %s; TLCP needs a separate encryption certificate with its own key (gmgate cert issue makes both)", n.EncCert, f.EncCert, n.SignCert, f.SignCert))
	}
	if opts.Offline {
		readKeyRef(probs, "sign_key", n.SignKey, f.SignKey)
		readKeyRef(probs, "enc_key", n.EncKey, f.EncKey)
		if signChain != nil && encChain != nil && len(probs.errs) == 0 {
			if err := checkPairUsages(f, n, signChain[0], encChain[0]); err != nil {
				probs.add("", err)
			}
		}
		if err := probs.err(); err != nil {
			return nil, nil, err
		}
		return tlcpCertificate(signChain, encChain, nil, nil), pairWarnings(f, n, signChain[0], encChain[0]), nil
	}

	signKey, err := openKey(opts.ctx(), n.SignKey, f.SignKey)
	if err != nil {
		probs.add("sign_key", err)
	}
	encKey, err := openKey(opts.ctx(), n.EncKey, f.EncKey)
	if err != nil {
		probs.add("enc_key", err)
	}
	signSM2 := sm2KeyFor(probs, "sign_key", n.SignKey, f.SignKey, n.SignCert, f.SignCert, signKey, signChain)
	encSM2 := sm2KeyFor(probs, "enc_key", n.EncKey, f.EncKey, n.EncCert, f.EncCert, encKey, encChain)
	fail := func() (*tlcp.Certificate, []string, error) {
		for _, k := range []accel.Key{signKey, encKey} {
			if k != nil {
				k.Close()
			}
		}
		return nil, nil, probs.err()
	}
	if len(probs.errs) > 0 {
		// What did load is still matched, so that a key from another
		// pair is reported together with the other half's problem.
		if signSM2 && !certinfo.PublicKeysEqual(signKey.Public(), signChain[0].PublicKey) {
			probs.add("sign_key", keyMismatch(n.SignKey, f.SignKey, n.SignCert, f.SignCert))
		}
		if encSM2 && !certinfo.PublicKeysEqual(encKey.Public(), encChain[0].PublicKey) {
			probs.add("enc_key", keyMismatch(n.EncKey, f.EncKey, n.EncCert, f.EncCert))
		}
		return fail()
	}
	sign, enc := signChain[0], encChain[0]

	signOK := certinfo.PublicKeysEqual(signKey.Public(), sign.PublicKey)
	encOK := certinfo.PublicKeysEqual(encKey.Public(), enc.PublicKey)
	switch {
	case !signOK && !encOK && certinfo.PublicKeysEqual(signKey.Public(), enc.PublicKey) && certinfo.PublicKeysEqual(encKey.Public(), sign.PublicKey):
		if certinfo.LooksLikeEnc(sign) && certinfo.LooksLikeSign(enc) {
			probs.add("sign_cert", fmt.Errorf("%s %s and %s %s are swapped: %s is the encryption certificate (key usage %s) and %s the signing certificate (key usage %s); exchange %s and %s",
				n.SignCert, f.SignCert, n.EncCert, f.EncCert, f.SignCert, certinfo.KeyUsageString(sign.KeyUsage), f.EncCert, certinfo.KeyUsageString(enc.KeyUsage), n.SignCert, n.EncCert))
			return fail()
		}
		probs.add("sign_key", fmt.Errorf("%s %s and %s %s are swapped: %s belongs to %s %s and %s to %s %s; exchange %s and %s",
			n.SignKey, keyref.Redact(f.SignKey), n.EncKey, keyref.Redact(f.EncKey), keyref.Redact(f.SignKey), n.EncCert, f.EncCert, keyref.Redact(f.EncKey), n.SignCert, f.SignCert, n.SignKey, n.EncKey))
		return fail()
	}
	if !signOK {
		probs.add("sign_key", keyMismatch(n.SignKey, f.SignKey, n.SignCert, f.SignCert))
	}
	if !encOK {
		probs.add("enc_key", keyMismatch(n.EncKey, f.EncKey, n.EncCert, f.EncCert))
	}
	if len(probs.errs) > 0 {
		return fail()
	}
	if err := checkPairUsages(f, n, sign, enc); err != nil {
		probs.add("", err)
		return fail()
	}
	if _, ok := encKey.(crypto.Decrypter); !ok {
		probs.add("enc_key", fmt.Errorf("%s %s: the key cannot decrypt, which the TLCP encryption key must", n.EncKey, keyref.Redact(f.EncKey)))
		return fail()
	}
	selfTest(probs, "sign_key", n.SignKey, f.SignKey, signKey, sign, accel.UseSign, opts)
	selfTest(probs, "enc_key", n.EncKey, f.EncKey, encKey, enc, accel.UseEnc, opts)
	if len(probs.errs) > 0 {
		return fail()
	}
	return tlcpCertificate(signChain, encChain, signKey, encKey), pairWarnings(f, n, sign, enc), nil
}

// loadSignOnly loads a TLCP identity of a signing certificate and key
// alone (LoadOptions.SignOnly), with the checks LoadTLCPFiles makes of
// the signing pair.
func loadSignOnly(f TLCPFiles, opts LoadOptions, n FieldNames) (*tlcp.Certificate, []string, error) {
	probs := &problems{side: "tlcp"}
	chain := loadSM2Chain(probs, "sign_cert", n.SignCert, f.SignCert, opts)
	if chain != nil {
		if err := checkSignUsage(n.SignCert, f.SignCert, chain[0]); err != nil {
			probs.add("sign_cert", err)
		}
	}
	if opts.Offline {
		readKeyRef(probs, "sign_key", n.SignKey, f.SignKey)
		if err := probs.err(); err != nil {
			return nil, nil, err
		}
		return tlcpCertificate(chain, nil, nil, nil), nil, nil
	}
	key, err := openKey(opts.ctx(), n.SignKey, f.SignKey)
	if err != nil {
		probs.add("sign_key", err)
	}
	if sm2KeyFor(probs, "sign_key", n.SignKey, f.SignKey, n.SignCert, f.SignCert, key, chain) && !certinfo.PublicKeysEqual(key.Public(), chain[0].PublicKey) {
		probs.add("sign_key", keyMismatch(n.SignKey, f.SignKey, n.SignCert, f.SignCert))
	}
	if len(probs.errs) == 0 {
		selfTest(probs, "sign_key", n.SignKey, f.SignKey, key, chain[0], accel.UseSign, opts)
	}
	if err := probs.err(); err != nil {
		if key != nil {
			key.Close()
		}
		return nil, nil, err
	}
	return tlcpCertificate(chain, nil, key, nil), nil, nil
}

func keyMismatch(keyField, key, certField, cert string) error {
	return fmt.Errorf("%s %s does not belong to %s %s (the public keys differ); give the key that was generated with this certificate", keyField, keyref.Redact(key), certField, cert)
}

// sm2KeyFor reports whether key and the chain of its certificate both
// loaded and the key is SM2, so that the two can be compared. A key that
// is not SM2 at all is the mistake to fix, not a mismatch: that is the
// problem added.
func sm2KeyFor(probs *problems, field, name, ref, certName, certPath string, key accel.Key, chain []*smx509.Certificate) bool {
	if key == nil || chain == nil {
		return false
	}
	if !sm2.IsSM2PublicKey(key.Public()) {
		probs.add(field, fmt.Errorf("%s %s is an %s key; TLCP needs SM2 keys: give the SM2 key generated with %s %s (an RSA or ECDSA key and its certificate go on the tls side)", name, keyref.Redact(ref), certinfo.DescribePublicKey(key.Public()), certName, certPath))
		return false
	}
	return true
}

// softwareBackend is the name accel gives keys held in memory.
const softwareBackend = "software"

// selfTest exercises a key on a device once before it serves: the public
// key it reports could match while the device cannot use the key.
func selfTest(probs *problems, field, name, ref string, key accel.Key, cert *smx509.Certificate, use accel.Use, opts LoadOptions) {
	if key.Backend() == softwareBackend {
		return
	}
	if err := accel.SelfTest(opts.ctx(), key, cert, use); err != nil {
		probs.add(field, fmt.Errorf("%s %s: self-test failed: %w", name, keyref.Redact(ref), err))
	}
}

// loadSM2Chain loads a certificate file of a TLCP pair (field, called
// name in messages) and checks that its leaf is SM2; it adds the problem
// and returns nil otherwise.
func loadSM2Chain(probs *problems, field, name, path string, opts LoadOptions) []*smx509.Certificate {
	chain, err := chain.Load(name, path, opts.Roots, opts.Now)
	if err != nil {
		probs.add(field, err)
		return nil
	}
	if !sm2.IsSM2PublicKey(chain[0].PublicKey) {
		probs.add(field, fmt.Errorf("%s %s: the certificate has an %s key, but TLCP needs SM2 certificates; put RSA/ECDSA certificates on the tls side and make an SM2 pair with: gmgate cert migrate --from %s", name, path, certinfo.DescribePublicKey(chain[0].PublicKey), path))
		return nil
	}
	return chain
}

// checkPairUsages checks the key usages of a TLCP pair: not swapped, and
// each fit for its role.
func checkPairUsages(f TLCPFiles, n FieldNames, sign, enc *smx509.Certificate) error {
	if certinfo.LooksLikeEnc(sign) && certinfo.LooksLikeSign(enc) {
		return fmt.Errorf("%s %s and %s %s are swapped (with their keys): %s has key usage %s, which is an encryption certificate; exchange %s/%s with %s/%s",
			n.SignCert, f.SignCert, n.EncCert, f.EncCert, f.SignCert, certinfo.KeyUsageString(sign.KeyUsage), n.SignCert, n.SignKey, n.EncCert, n.EncKey)
	}
	if err := checkSignUsage(n.SignCert, f.SignCert, sign); err != nil {
		return err
	}
	if enc.KeyUsage != 0 && enc.KeyUsage&certinfo.EncKeyUsage == 0 {
		return fmt.Errorf("%s %s has key usage %s without keyEncipherment, dataEncipherment or keyAgreement, so it cannot be the encryption certificate; reissue it (gmgate cert issue does)", n.EncCert, f.EncCert, certinfo.KeyUsageString(enc.KeyUsage))
	}
	return nil
}

func checkSignUsage(name, path string, sign *smx509.Certificate) error {
	if sign.KeyUsage != 0 && sign.KeyUsage&smx509.KeyUsageDigitalSignature == 0 {
		return fmt.Errorf("%s %s has key usage %s without digitalSignature, so it cannot sign TLCP handshakes; reissue it with digitalSignature (gmgate cert issue does)", name, path, certinfo.KeyUsageString(sign.KeyUsage))
	}
	return nil
}

func pairWarnings(f TLCPFiles, n FieldNames, sign, enc *smx509.Certificate) []string {
	var warnings []string
	if string(sign.RawSubject) != string(enc.RawSubject) {
		warnings = append(warnings, fmt.Sprintf("%s %s and %s %s have different subjects (%q, %q); GmSSL peers reject such a pair", n.SignCert, f.SignCert, n.EncCert, f.EncCert, sign.Subject.String(), enc.Subject.String()))
	}
	if string(sign.RawIssuer) != string(enc.RawIssuer) {
		warnings = append(warnings, fmt.Sprintf("%s %s and %s %s have different issuers; GmSSL peers reject such a pair", n.SignCert, f.SignCert, n.EncCert, f.EncCert))
	}
	if certinfo.SANString(sign) != certinfo.SANString(enc) {
		warnings = append(warnings, fmt.Sprintf("%s %s and %s %s name different hosts (%s / %s); clients that check the enc certificate's names reject it", n.SignCert, f.SignCert, n.EncCert, f.EncCert, certinfo.SANString(sign), certinfo.SANString(enc)))
	}
	return warnings
}

// tlcpCertificate builds the identity; encChain is nil for a signing
// pair alone, and the keys are nil when not opened.
func tlcpCertificate(signChain, encChain []*smx509.Certificate, signKey, encKey accel.Key) *tlcp.Certificate {
	cert := &tlcp.Certificate{SignLeaf: signChain[0]}
	if len(encChain) > 0 {
		cert.EncLeaf = encChain[0]
	}
	if signKey != nil {
		cert.SignKey = signKey
	}
	if encKey != nil {
		cert.EncKey = encKey
	}
	for _, c := range signChain {
		cert.SignCertificate = append(cert.SignCertificate, c.Raw)
	}
	for _, c := range encChain {
		cert.EncCertificate = append(cert.EncCertificate, c.Raw)
	}
	return cert
}

// LoadTLSFiles loads a TLS certificate and checks it: an RSA, ECDSA or
// Ed25519 key that belongs to the certificate, usable for TLS servers,
// valid now, with its chain in order (and verifying against opts.Roots
// when set). Problems of the certificate and of the key are both
// reported. With opts.Offline the key is not opened.
//
// The warnings are those of LoadTLCPFiles: a key or password file that
// others may read.
func LoadTLSFiles(f TLSFiles, opts LoadOptions) (*tls.Certificate, []string, error) {
	c, warnings, err := loadTLSFiles(f, opts)
	if err != nil {
		return nil, nil, err
	}
	n := opts.names()
	return c, append(warnings, secretFileWarnings(n.Key, f.Key)...), nil
}

func loadTLSFiles(f TLSFiles, opts LoadOptions) (*tls.Certificate, []string, error) {
	n := opts.names()
	probs := &problems{side: "tls"}
	leaf, chain := checkTLSChain(probs, f, n, opts)
	if opts.Offline {
		readKeyRef(probs, "key", n.Key, f.Key)
		if err := probs.err(); err != nil {
			return nil, nil, err
		}
		return tlsCertificate(chain, leaf, nil), nil, nil
	}
	key, err := openKey(opts.ctx(), n.Key, f.Key)
	if err != nil {
		probs.add("key", err)
	}
	if leaf != nil && key != nil && !certinfo.PublicKeysEqual(key.Public(), leaf.PublicKey) {
		probs.add("key", keyMismatch(n.Key, f.Key, n.Cert, f.Cert))
	}
	if err := probs.err(); err != nil {
		if key != nil {
			key.Close()
		}
		return nil, nil, err
	}
	return tlsCertificate(chain, leaf, key), nil, nil
}

// checkTLSChain loads the certificate of a TLS identity and checks its
// key type and usage; it adds the problems and returns a nil leaf on
// failure.
func checkTLSChain(probs *problems, f TLSFiles, n FieldNames, opts LoadOptions) (*x509.Certificate, []*smx509.Certificate) {
	chain, err := chain.Load(n.Cert, f.Cert, opts.Roots, opts.Now)
	if err != nil {
		probs.add("cert", err)
		return nil, nil
	}
	leaf := chain[0]
	if sm2.IsSM2PublicKey(leaf.PublicKey) {
		probs.add("cert", fmt.Errorf("%s %s is an SM2 certificate, which TLS clients cannot use; give it as a tlcp sign_cert/enc_cert, and an RSA or ECDSA certificate for tls", n.Cert, f.Cert))
		return nil, nil
	}
	switch leaf.PublicKey.(type) {
	case *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey:
	default:
		probs.add("cert", fmt.Errorf("%s %s has an unsupported %s key for TLS", n.Cert, f.Cert, certinfo.DescribePublicKey(leaf.PublicKey)))
		return nil, nil
	}
	if leaf.KeyUsage != 0 && leaf.KeyUsage&(smx509.KeyUsageDigitalSignature|smx509.KeyUsageKeyEncipherment) == 0 {
		probs.add("cert", fmt.Errorf("%s %s has key usage %s, which a TLS server certificate cannot use (needs digitalSignature); reissue it", n.Cert, f.Cert, certinfo.KeyUsageString(leaf.KeyUsage)))
		return nil, nil
	}
	parsed, err := x509.ParseCertificate(leaf.Raw)
	if err != nil {
		probs.add("cert", fmt.Errorf("%s %s: %v", n.Cert, f.Cert, err))
		return nil, nil
	}
	return parsed, chain
}

func tlsCertificate(chain []*smx509.Certificate, leaf *x509.Certificate, key accel.Key) *tls.Certificate {
	out := &tls.Certificate{Leaf: leaf}
	if key != nil {
		out.PrivateKey = key
	}
	for _, c := range chain {
		out.Certificate = append(out.Certificate, c.Raw)
	}
	return out
}

func openKey(ctx context.Context, field, ref string) (accel.Key, error) {
	if strings.TrimSpace(ref) == "" {
		return nil, fmt.Errorf("%s is not set; give the key file path or key reference", field)
	}
	k, err := accel.Open(ctx, ref)
	var pe *fs.PathError
	if r, rerr := accel.ParseRef(ref); rerr == nil && r.Scheme == "file" && errors.As(err, &pe) && pe.Path == r.Path && errors.Is(pe.Err, fs.ErrNotExist) {
		return nil, certinfo.MissingFile(field, keyref.Redact(r.Path), "the PEM private key file or a key reference")
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, certinfo.ExplainKeyError(err))
	}
	return k, nil
}

// secretFileWarnings warns about the secret files of key references given
// as pairs of field name and reference: a key file, and the password or
// PIN file a reference names, that users other than gmgate's may read. A
// path in a reference's query is not shown (the query never is).
func secretFileWarnings(namesAndRefs ...string) []string {
	var out []string
	for i := 0; i+1 < len(namesAndRefs); i += 2 {
		name, ref := namesAndRefs[i], namesAndRefs[i+1]
		if strings.TrimSpace(ref) == "" {
			continue
		}
		r, err := accel.ParseRef(ref)
		if err != nil {
			continue
		}
		if r.Scheme == "file" {
			if problem, fix := keyref.LooseMode(r.Path, r.Path); problem != "" {
				out = append(out, fmt.Sprintf("%s %s; %s", name, problem, fix))
			}
		}
		for _, param := range []string{"password-file", "pin-file"} {
			for _, file := range r.Params[param] {
				if problem, fix := keyref.LooseMode(file, "the "+param+" of "+name); problem != "" {
					out = append(out, fmt.Sprintf("%s; %s", problem, fix))
				}
			}
		}
	}
	return out
}

// CheckKeyRef reads a key reference as opening its key would, and opens
// nothing: no key file, library, crypto card, password or PIN (for an
// offline check). The scheme must be known and the parameters valid,
// with each password or PIN named once (see accel.Check).
func CheckKeyRef(ref string) error {
	return accel.Check(ref)
}

// readKeyRef adds the problem CheckKeyRef finds in the key reference of
// field; an empty one is the configuration's problem.
func readKeyRef(probs *problems, field, name, ref string) {
	if strings.TrimSpace(ref) == "" {
		return
	}
	if err := CheckKeyRef(ref); err != nil {
		probs.add(field, fmt.Errorf("%s: %w", name, err))
	}
}
