package pki

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/accel"
	"github.com/gmgate/gmgate/certs/internal/certinfo"
	"github.com/gmgate/gmgate/certs/internal/pemfile"
)

// KeyAlgorithm names the key type of a CA or certificate that gmgate
// generates.
type KeyAlgorithm string

const (
	// KeySM2 is an SM2 key on sm2p256v1, signing with SM2-with-SM3.
	KeySM2 KeyAlgorithm = "sm2"
	// KeyECDSAP256 is an ECDSA P-256 key, for the TLS side.
	KeyECDSAP256 KeyAlgorithm = "ecdsa-p256"
	// KeyECDSAP384 is an ECDSA P-384 key, for the TLS side.
	KeyECDSAP384 KeyAlgorithm = "ecdsa-p384"
	// KeyRSA2048, KeyRSA3072 and KeyRSA4096 are RSA keys, for the TLS
	// side.
	KeyRSA2048 KeyAlgorithm = "rsa-2048"
	KeyRSA3072 KeyAlgorithm = "rsa-3072"
	KeyRSA4096 KeyAlgorithm = "rsa-4096"
)

// KeyAlgorithms lists the key types gmgate generates.
var KeyAlgorithms = []KeyAlgorithm{KeySM2, KeyECDSAP256, KeyECDSAP384, KeyRSA2048, KeyRSA3072, KeyRSA4096}

// ParseKeyAlgorithm reads a key type name such as "sm2" or "rsa-2048".
func ParseKeyAlgorithm(s string) (KeyAlgorithm, error) {
	for _, a := range KeyAlgorithms {
		if string(a) == strings.ToLower(strings.TrimSpace(s)) {
			return a, nil
		}
	}
	names := make([]string, len(KeyAlgorithms))
	for i, a := range KeyAlgorithms {
		names[i] = string(a)
	}
	return "", fmt.Errorf("key type %q: give one of %s", s, strings.Join(names, ", "))
}

// IsSM2 reports whether the algorithm is SM2 (TLCP) rather than one for
// the TLS side.
func (a KeyAlgorithm) IsSM2() bool { return a == "" || a == KeySM2 }

// family names the kind of key in a CA's default common name.
func (a KeyAlgorithm) family() string {
	switch {
	case a.IsSM2():
		return "SM2"
	case strings.HasPrefix(string(a), "rsa-"):
		return "RSA"
	case strings.HasPrefix(string(a), "ecdsa-"):
		return "ECDSA"
	}
	return strings.ToUpper(string(a))
}

// keyAlgorithmOf names the algorithm of a public key ("sm2",
// "ecdsa-p256", "rsa-2048", ...).
func keyAlgorithmOf(pub crypto.PublicKey) KeyAlgorithm {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if sm2.IsSM2PublicKey(k) {
			return KeySM2
		}
		return KeyAlgorithm("ecdsa-" + strings.ToLower(strings.ReplaceAll(k.Curve.Params().Name, "-", "")))
	case *rsa.PublicKey:
		return KeyAlgorithm(fmt.Sprintf("rsa-%d", k.N.BitLen()))
	case ed25519.PublicKey:
		return "ed25519"
	}
	return KeyAlgorithm(fmt.Sprintf("%T", pub))
}

// Validity limits. The strictest deployed TLCP peer (GmSSL) rejects
// certificates valid for longer than MaxValidity.
const (
	MaxValidity         = 3653 * 24 * time.Hour
	DefaultCAValidity   = 3650 * 24 * time.Hour
	DefaultLeafValidity = 365 * 24 * time.Hour
	// backdate moves NotBefore into the past so that peers with a
	// slightly slow clock accept a certificate issued a moment ago.
	backdate = 5 * time.Minute
)

// File names inside a CA directory.
const (
	CACertFile           = "ca.crt"
	CAKeyFile            = "ca.key"
	IntermediateCertFile = "intermediate.crt"
	IntermediateKeyFile  = "intermediate.key"
)

// CAOptions describe a new local CA.
type CAOptions struct {
	// Subject of the root; CommonName defaults to "gmgate local SM2 root CA".
	Subject pkix.Name
	// Validity of the root (and the intermediate); DefaultCAValidity when
	// zero, at most MaxValidity.
	Validity time.Duration
	// Intermediate adds an intermediate CA that issues the leaves, so that
	// the root key can be kept offline.
	Intermediate bool
	// KeyAlgorithm is KeySM2 (the default) for TLCP, or an ECDSA or RSA
	// algorithm for a CA that issues TLS certificates.
	KeyAlgorithm KeyAlgorithm
	// Now returns the current time; time.Now when nil.
	Now func() time.Time
}

// CA is a certificate authority that issues leaves: a root and, when
// present, an intermediate that does the issuing.
type CA struct {
	Root *smx509.Certificate
	// RootKey is nil when the CA was loaded without the root key (an
	// intermediate CA whose root key is kept elsewhere).
	RootKey      crypto.Signer
	Intermediate *smx509.Certificate
	// IntermediateKey signs leaves when Intermediate is set.
	IntermediateKey crypto.Signer
}

// issuer returns the certificate and key that sign leaves.
func (ca *CA) issuer() (*smx509.Certificate, crypto.Signer, error) {
	if ca.Intermediate != nil {
		if ca.IntermediateKey == nil {
			return nil, nil, errors.New("the CA has no intermediate key")
		}
		return ca.Intermediate, ca.IntermediateKey, nil
	}
	if ca.RootKey == nil {
		return nil, nil, errors.New("the CA has no root key")
	}
	return ca.Root, ca.RootKey, nil
}

// Chain returns the CA certificates that are sent after a leaf it issues
// (the intermediate, if any; never the root).
func (ca *CA) Chain() []*smx509.Certificate {
	if ca.Intermediate != nil {
		return []*smx509.Certificate{ca.Intermediate}
	}
	return nil
}

// Pool returns a pool holding the root, for verifying what the CA issued.
func (ca *CA) Pool() *smx509.CertPool {
	p := smx509.NewCertPool()
	p.AddCert(ca.Root)
	return p
}

// KeyAlgorithm reports the key type of the issuing certificate.
func (ca *CA) KeyAlgorithm() KeyAlgorithm {
	c := ca.Root
	if ca.Intermediate != nil {
		c = ca.Intermediate
	}
	return keyAlgorithmOf(c.PublicKey)
}

// generateKey makes a fresh key of the given algorithm.
func generateKey(alg KeyAlgorithm) (crypto.Signer, error) {
	switch alg {
	case "", KeySM2:
		return sm2.GenerateKey(rand.Reader)
	case KeyECDSAP256:
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case KeyECDSAP384:
		return ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case KeyRSA2048:
		return rsa.GenerateKey(rand.Reader, 2048)
	case KeyRSA3072:
		return rsa.GenerateKey(rand.Reader, 3072)
	case KeyRSA4096:
		return rsa.GenerateKey(rand.Reader, 4096)
	}
	_, err := ParseKeyAlgorithm(string(alg))
	return nil, err
}

// randomSerial returns a positive 128-bit serial whose DER encoding is
// 16 bytes long (peers reject serials shorter than 4 bytes).
func randomSerial() (*big.Int, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	b[0] = b[0]&0x7f | 0x40
	return new(big.Int).SetBytes(b), nil
}

func checkValidity(d time.Duration, def time.Duration) (time.Duration, error) {
	if d == 0 {
		d = def
	}
	if d < 0 {
		return 0, fmt.Errorf("validity %v is negative", d)
	}
	if d > MaxValidity {
		return 0, fmt.Errorf("validity of %d days is longer than %d days, which strict TLCP peers (GmSSL) reject; choose a shorter validity", int(d.Hours()/24), int(MaxValidity.Hours()/24))
	}
	return d, nil
}

// NewCA makes a root CA (and an intermediate when opts.Intermediate).
func NewCA(opts CAOptions) (*CA, error) {
	validity, err := checkValidity(opts.Validity, DefaultCAValidity)
	if err != nil {
		return nil, err
	}
	subject := opts.Subject
	if subject.CommonName == "" {
		subject.CommonName = "gmgate local " + opts.KeyAlgorithm.family() + " root CA"
	}
	t := certinfo.Now(opts.Now)
	rootKey, err := generateKey(opts.KeyAlgorithm)
	if err != nil {
		return nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &smx509.Certificate{
		SerialNumber:          serial,
		Subject:               subject,
		NotBefore:             t.Add(-backdate),
		NotAfter:              t.Add(-backdate).Add(validity),
		KeyUsage:              smx509.KeyUsageCertSign | smx509.KeyUsageCRLSign | smx509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	if opts.Intermediate {
		tmpl.MaxPathLen = 1
	}
	root, err := createCertificate(tmpl, nil, rootKey.Public(), rootKey)
	if err != nil {
		return nil, err
	}
	ca := &CA{Root: root, RootKey: rootKey}
	if !opts.Intermediate {
		return ca, nil
	}
	interKey, err := generateKey(opts.KeyAlgorithm)
	if err != nil {
		return nil, err
	}
	if serial, err = randomSerial(); err != nil {
		return nil, err
	}
	interSubject := subject
	interSubject.CommonName = subject.CommonName + " - intermediate"
	if opts.Subject.CommonName == "" {
		interSubject.CommonName = "gmgate local " + opts.KeyAlgorithm.family() + " intermediate CA"
	}
	itmpl := &smx509.Certificate{
		SerialNumber:          serial,
		Subject:               interSubject,
		NotBefore:             tmpl.NotBefore,
		NotAfter:              tmpl.NotAfter,
		KeyUsage:              smx509.KeyUsageCertSign | smx509.KeyUsageCRLSign | smx509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	inter, err := createCertificate(itmpl, root, interKey.Public(), rootKey)
	if err != nil {
		return nil, err
	}
	ca.Intermediate, ca.IntermediateKey = inter, interKey
	return ca, nil
}

// createCertificate signs tmpl with key (self-signed when parent is nil)
// and parses the result.
func createCertificate(tmpl, parent *smx509.Certificate, pub crypto.PublicKey, key crypto.Signer) (*smx509.Certificate, error) {
	if parent == nil {
		parent = tmpl
	}
	der, err := smx509.CreateCertificate(rand.Reader, tmpl, parent, pub, key)
	if err != nil {
		return nil, err
	}
	return smx509.ParseCertificate(der)
}

// Write stores the CA in dir: ca.crt and ca.key, plus intermediate.crt and
// intermediate.key when there is an intermediate. Keys are written 0600,
// encrypted as enc says (nil: not encrypted).
func (ca *CA) Write(dir string, enc *KeyEncryption) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := pemfile.WriteCertFile(filepath.Join(dir, CACertFile), ca.Root); err != nil {
		return err
	}
	if ca.RootKey != nil {
		if err := pemfile.WriteKeyFile(filepath.Join(dir, CAKeyFile), ca.RootKey, enc); err != nil {
			return err
		}
	}
	if ca.Intermediate != nil {
		if err := pemfile.WriteCertFile(filepath.Join(dir, IntermediateCertFile), ca.Intermediate); err != nil {
			return err
		}
		if err := pemfile.WriteKeyFile(filepath.Join(dir, IntermediateKeyFile), ca.IntermediateKey, enc); err != nil {
			return err
		}
	}
	return nil
}

// LoadCA reads a CA written by Write (or by gmgate cert init-ca) whose
// keys are not encrypted.
func LoadCA(dir string) (*CA, error) {
	return LoadCAWithOptions(dir, LoadCAOptions{})
}

// LoadCAOptions say how to open the CA keys.
type LoadCAOptions struct {
	// KeyPasswordFile names a file holding the password of encrypted
	// CA keys.
	KeyPasswordFile string
	// KeyPasswordEnv names an environment variable holding it.
	KeyPasswordEnv string
	// PasswordFlag is the command-line flag that gives the password,
	// named in errors in place of key reference parameters.
	PasswordFlag string
}

// LoadCAWithOptions reads a CA directory. With an intermediate, the root
// key is optional (it may be kept offline).
func LoadCAWithOptions(dir string, opts LoadCAOptions) (*CA, error) {
	rootFile := filepath.Join(dir, CACertFile)
	roots, err := pemfile.ReadCertificates(rootFile)
	if err != nil {
		return nil, fmt.Errorf("CA %s: %w (create a CA with: gmgate cert init-ca --out %s)", dir, err, dir)
	}
	ca := &CA{Root: roots[0]}
	if !ca.Root.IsCA {
		return nil, fmt.Errorf("CA certificate %s is not a CA certificate (no BasicConstraints CA:TRUE)", rootFile)
	}
	interFile := filepath.Join(dir, IntermediateCertFile)
	if _, err := os.Stat(interFile); err == nil {
		inters, err := pemfile.ReadCertificates(interFile)
		if err != nil {
			return nil, err
		}
		ca.Intermediate = inters[0]
		if err := ca.Intermediate.CheckSignatureFrom(ca.Root); err != nil {
			return nil, fmt.Errorf("intermediate %s was not issued by the root %s: %v", interFile, rootFile, err)
		}
		ca.IntermediateKey, err = openCAKey(filepath.Join(dir, IntermediateKeyFile), ca.Intermediate, opts)
		if err != nil {
			return nil, err
		}
	}
	rootKeyFile := filepath.Join(dir, CAKeyFile)
	if _, err := os.Stat(rootKeyFile); err == nil || ca.Intermediate == nil {
		ca.RootKey, err = openCAKey(rootKeyFile, ca.Root, opts)
		if err != nil {
			return nil, err
		}
	}
	return ca, nil
}

func openCAKey(path string, cert *smx509.Certificate, opts LoadCAOptions) (crypto.Signer, error) {
	ref, err := fileKeyRef(path, opts.KeyPasswordFile, opts.KeyPasswordEnv)
	if err != nil {
		return nil, err
	}
	key, err := accel.Open(context.Background(), ref)
	if f := opts.PasswordFlag; f != "" {
		switch {
		case errors.Is(err, accel.ErrKeyEncrypted):
			return nil, fmt.Errorf("CA key %s is encrypted; give its password with %s FILE", path, f)
		case errors.Is(err, accel.ErrKeyPassword):
			return nil, fmt.Errorf("CA key %s: wrong password; check the password in the file %s gives", path, f)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", certinfo.ExplainKeyError(err))
	}
	if !certinfo.PublicKeysEqual(key.Public(), cert.PublicKey) {
		key.Close()
		return nil, fmt.Errorf("CA key %s does not belong to its certificate (public keys differ); restore the key written with it", path)
	}
	return key, nil
}

// fileKeyRef builds an accel file reference with an optional password
// source.
func fileKeyRef(path, passwordFile, passwordEnv string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	switch {
	case passwordFile != "":
		pf, err := filepath.Abs(passwordFile)
		if err != nil {
			return "", err
		}
		return "file:" + abs + "?password-file=" + url.QueryEscape(pf), nil
	case passwordEnv != "":
		return "file:" + abs + "?password-env=" + url.QueryEscape(passwordEnv), nil
	}
	return abs, nil
}
