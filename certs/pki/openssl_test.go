package pki

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/accel"
	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/certs/internal/certinfo"
	"github.com/gmgate/gmgate/certs/internal/pemfile"
	"github.com/gmgate/gmgate/internal/testopenssl"
	"github.com/gmgate/gmgate/tlcp"
	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

const distID = "distid:1234567812345678"

// needOpenSSL and runOpenSSL run the openssl command; a test without it
// skips.
var (
	needOpenSSL = testopenssl.Bin
	runOpenSSL  = testopenssl.Run
)

func TestOpenSSLAcceptsGmgateCertificates(t *testing.T) {
	bin := needOpenSSL(t)
	for _, intermediate := range []bool{false, true} {
		name := "root"
		if intermediate {
			name = "intermediate"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			ca := newTestCA(t, intermediate)
			if err := ca.Write(dir, nil); err != nil {
				t.Fatal(err)
			}
			password := []byte("pw for openssl")
			pwFile := filepath.Join(dir, "pw")
			os.WriteFile(pwFile, password, 0o600)
			f := writeTestPair(t, ca, dir, "site", password, "site.example.cn")

			text := runOpenSSL(t, bin, dir, "x509", "-text", "-noout", "-in", f.SignCert)
			wantAll(t, text, "SM2", "Digital Signature, Non Repudiation", "TLS Web Server Authentication, TLS Web Client Authentication", "DNS:site.example.cn, IP Address:127.0.0.1")
			if strings.Contains(text, "Basic Constraints") {
				t.Error("openssl shows Basic Constraints on the signing certificate")
			}
			text = runOpenSSL(t, bin, dir, "x509", "-text", "-noout", "-in", f.EncCert)
			wantAll(t, text, "Key Encipherment, Data Encipherment, Key Agreement")

			// openssl verify applies -vfyopt to the certificate it checks
			// only, so a chain is checked link by link.
			caFile := filepath.Join(dir, CACertFile)
			issuerArgs := []string{"-CAfile", caFile}
			if intermediate {
				inter := filepath.Join(dir, IntermediateCertFile)
				out := runOpenSSL(t, bin, dir, "verify", "-vfyopt", distID, "-CAfile", caFile, inter)
				if !strings.Contains(out, inter+": OK") {
					t.Errorf("openssl verify %s: %s", inter, out)
				}
				issuerArgs = []string{"-partial_chain", "-CAfile", inter}
			}
			for _, c := range []string{f.SignCert, f.EncCert} {
				out := runOpenSSL(t, bin, dir, append(append([]string{"verify", "-vfyopt", distID}, issuerArgs...), c)...)
				if !strings.Contains(out, c+": OK") {
					t.Errorf("openssl verify %s: %s", c, out)
				}
			}

			// The keys: OpenSSL 3.0 has no hmacWithSM3 PBKDF2 PRF (GmSSL
			// and Tongsuo read it), so it checks the layout and reads the
			// keys once decrypted by us.
			parsed := runOpenSSL(t, bin, dir, "asn1parse", "-in", f.EncKey)
			// OpenSSL 3.0 prints hmacWithSM3 by its OID.
			wantAll(t, parsed, ":PBES2", ":PBKDF2", ":1.2.156.10197.1.401.2", ":sm4-cbc")
			if i := strings.Index(parsed, ":1.2.156.10197.1.401.2"); i >= 0 && strings.Contains(strings.SplitN(parsed[i:], "\n", 3)[1], "NULL") {
				t.Error("the hmacWithSM3 identifier carries NULL parameters, which GmSSL rejects")
			}
			for _, pair := range [][2]string{{f.SignKey, f.SignCert}, {f.EncKey, f.EncCert}} {
				data, _ := os.ReadFile(pair[0])
				key, err := accel.ParsePEMPrivateKey(data, password)
				if err != nil {
					t.Fatal(err)
				}
				plain := filepath.Join(dir, "plain.key")
				if err := pemfile.WriteKeyFile(plain, key, nil); err != nil {
					t.Fatal(err)
				}
				pubFromKey := runOpenSSL(t, bin, dir, "pkey", "-in", plain, "-pubout")
				pubFromCert := runOpenSSL(t, bin, dir, "x509", "-in", pair[1], "-noout", "-pubkey")
				if pubFromKey != pubFromCert {
					t.Errorf("openssl: public key of %s differs from %s", pair[0], pair[1])
				}
			}

			// And our own client accepts them in a handshake.
			ref := func(k string) string { return "file:" + k + "?password-file=" + pwFile }
			cert, err := certs.LoadTLCP(f.SignCert, ref(f.SignKey), f.EncCert, ref(f.EncKey))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := handshakeTLCP(t, &tlcp.Config{Certificates: []tlcp.Certificate{*cert}}, ca.Pool(), "site.example.cn"); err != nil {
				t.Fatalf("handshake: %v", err)
			}
		})
	}
}

// openSSLPKI makes an SM2 CA and a server sign/enc pair with the OpenSSL
// CLI. withID chooses whether the leaves are signed with the default SM2
// user ID (-sigopt distid:...) or, as OpenSSL 3.0 does by default, with an
// empty one.
func openSSLPKI(t *testing.T, bin, dir string, withID bool) (caCert string, f certs.TLCPFiles) {
	t.Helper()
	run := func(args ...string) { runOpenSSL(t, bin, dir, args...) }
	run("genpkey", "-algorithm", "SM2", "-out", "ca.key")
	run("req", "-x509", "-new", "-key", "ca.key", "-sm3", "-sigopt", distID, "-subj", "/C=CN/O=OpenSSL test/CN=OpenSSL SM2 CA", "-days", "30",
		"-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-out", "ca.crt")
	usages := map[string]string{"sign": "digitalSignature,nonRepudiation", "enc": "keyEncipherment,dataEncipherment,keyAgreement"}
	for _, role := range []string{"sign", "enc"} {
		ext := "subjectAltName=DNS:server.test,IP:127.0.0.1\nkeyUsage=critical," + usages[role] + "\nextendedKeyUsage=serverAuth,clientAuth\n"
		os.WriteFile(filepath.Join(dir, role+".ext"), []byte(ext), 0o644)
		run("genpkey", "-algorithm", "SM2", "-out", role+".key")
		run("req", "-new", "-key", role+".key", "-sm3", "-sigopt", distID, "-subj", "/C=CN/O=OpenSSL test/CN=server.test", "-out", role+".csr")
		args := []string{"x509", "-req", "-in", role + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-sm3", "-vfyopt", distID, "-extfile", role + ".ext", "-days", "30", "-out", role + ".crt"}
		if withID {
			args = append(args, "-sigopt", distID)
		}
		run(args...)
	}
	p := func(n string) string { return filepath.Join(dir, n) }
	return p("ca.crt"), certs.TLCPFiles{SignCert: p("sign.crt"), SignKey: p("sign.key"), EncCert: p("enc.crt"), EncKey: p("enc.key")}
}

func TestOpenSSLMadeCertificatesServe(t *testing.T) {
	bin := needOpenSSL(t)
	dir := t.TempDir()
	caFile, f := openSSLPKI(t, bin, dir, true)
	// The encryption key as OpenSSL encrypts PKCS#8 (SM4-CBC, HMAC-SHA256
	// PRF with NULL): read leniently.
	runOpenSSL(t, bin, dir, "pkcs8", "-topk8", "-v2", "sm4-cbc", "-in", f.EncKey, "-out", "enc.p8.key", "-passout", "pass:openssl pw")
	t.Setenv("GMGATE_TEST_OPENSSL_PW", "openssl pw")
	f.EncKey = "file:" + filepath.Join(dir, "enc.p8.key") + "?password-env=GMGATE_TEST_OPENSSL_PW"

	roots, err := certs.ReadRoots(caFile)
	if err != nil {
		t.Fatal(err)
	}
	cert, warnings, err := certs.LoadTLCPFiles(f, certs.LoadOptions{Roots: roots})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) > 0 {
		t.Errorf("warnings: %v", warnings)
	}
	pool := smx509.NewCertPool()
	pool.AddCert(roots[0])
	peer, err := handshakeTLCP(t, &tlcp.Config{Certificates: []tlcp.Certificate{*cert}}, pool, "server.test")
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	if peer[0].Subject.CommonName != "server.test" || peer[0].Issuer.CommonName != "OpenSSL SM2 CA" {
		t.Errorf("peer certificate %q from %q", peer[0].Subject, peer[0].Issuer)
	}
	r := Inspect([]string{f.SignCert, filepath.Join(dir, "sign.key"), filepath.Join(dir, "enc.p8.key")}, InspectOptions{Roots: roots})
	if r.HasErrors() {
		var b bytes.Buffer
		r.WriteText(&b)
		t.Errorf("inspect found errors in OpenSSL-made files:\n%s", b.String())
	}
}

func TestOpenSSLEmptyUserIDRecognised(t *testing.T) {
	bin := needOpenSSL(t)
	dir := t.TempDir()
	caFile, f := openSSLPKI(t, bin, dir, false)
	// OpenSSL itself only accepts it without distid.
	runOpenSSL(t, bin, dir, "verify", "-CAfile", caFile, f.SignCert)

	roots, err := certs.ReadRoots(caFile)
	if err != nil {
		t.Fatal(err)
	}
	r := Inspect([]string{f.SignCert}, InspectOptions{Roots: roots})
	var b bytes.Buffer
	r.WriteText(&b)
	wantAll(t, b.String(), "ERROR: SM2 signature signed with an empty user ID", "not with the default ID 1234567812345678", "-sigopt distid:1234567812345678")
	if strings.Contains(b.String(), "bad signature") {
		t.Errorf("reported as a bare bad signature:\n%s", b.String())
	}
	_, _, err = certs.LoadTLCPFiles(f, certs.LoadOptions{Roots: roots})
	if err == nil {
		t.Fatal("loaded a pair signed with an empty user ID against its CA")
	}
	wantAll(t, err.Error(), "sign_cert "+f.SignCert, "EMPTY user ID", "-sigopt distid:1234567812345678")
}

func TestEmptyUserIDRecognisedWithoutOpenSSL(t *testing.T) {
	ca := newTestCA(t, false)
	d, err := ca.IssueDual(IssueOptions{DNSNames: []string{"noid.example.cn"}})
	if err != nil {
		t.Fatal(err)
	}
	bad := resignWithEmptyID(t, d.SignCert, ca)
	if !certinfo.SignedWithEmptyID(bad, ca.Root) || certinfo.SignedWithEmptyID(d.SignCert, ca.Root) {
		t.Fatal("empty-ID detection is wrong")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "noid.crt")
	os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: bad.Raw}), 0o644)
	caFile := filepath.Join(dir, "ca.crt")
	pemfile.WriteCertFile(caFile, ca.Root)
	var b bytes.Buffer
	Inspect([]string{p, caFile}, InspectOptions{}).WriteText(&b)
	wantAll(t, b.String(), "empty user ID", "-sigopt distid:1234567812345678")

	// A signature that is simply wrong is not mistaken for the empty ID.
	other := newTestCA(t, false)
	b.Reset()
	wrong := *other.Root
	wrong.RawSubject = ca.Root.RawSubject
	Inspect([]string{filepath.Join(dir, "noid.crt")}, InspectOptions{Roots: []*smx509.Certificate{&wrong}}).WriteText(&b)
	wantAll(t, b.String(), "bad signature")
}

// resignWithEmptyID replaces c's signature with one made by the CA with an
// empty SM2 user ID, as OpenSSL 3.0 does without distid.
func resignWithEmptyID(t *testing.T, c *smx509.Certificate, ca *CA) *smx509.Certificate {
	t.Helper()
	key := ca.RootKey.(*sm2.PrivateKey)
	point, ok := certinfo.UncompressedPoint(&key.PublicKey)
	if !ok {
		t.Fatal("no point")
	}
	h := sm3.New()
	h.Write(certinfo.ZAWithID(point, nil))
	h.Write(c.RawTBSCertificate)
	sig, err := sm2.SignASN1(rand.Reader, key, h.Sum(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	in := cryptobyte.String(c.Raw)
	var outer, tbs, alg cryptobyte.String
	if !in.ReadASN1(&outer, cbasn1.SEQUENCE) || !outer.ReadASN1Element(&tbs, cbasn1.SEQUENCE) || !outer.ReadASN1Element(&alg, cbasn1.SEQUENCE) {
		t.Fatal("cannot split the certificate")
	}
	var b cryptobyte.Builder
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddBytes(tbs)
		b.AddBytes(alg)
		b.AddASN1BitString(sig)
	})
	der, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	out, err := smx509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A key encrypted with an algorithm gmgate lacks: loading and inspecting
// it name the algorithm instead of blaming the password.
func TestOpenSSLKeyWithUnsupportedCipher(t *testing.T) {
	bin := needOpenSSL(t)
	dir := t.TempDir()
	runOpenSSL(t, bin, dir, "genpkey", "-algorithm", "SM2", "-out", "plain.key")
	runOpenSSL(t, bin, dir, "pkcs8", "-topk8", "-in", "plain.key", "-v2", "camellia-128-cbc", "-passout", "pass:pw", "-out", "camellia.key")
	t.Setenv("GMGATE_TEST_KEYPW", "pw")
	_, err := accel.Open(context.Background(), "file:"+filepath.Join(dir, "camellia.key")+"?password-env=GMGATE_TEST_KEYPW")
	if err == nil || !errors.Is(err, accel.ErrKeyEncryption) || errors.Is(err, accel.ErrKeyPassword) || !strings.Contains(err.Error(), "cipher CAMELLIA-128-CBC") {
		t.Fatalf("got %v, want an error naming the cipher", err)
	}
	out, bad := inspectText(t, []string{filepath.Join(dir, "camellia.key")}, InspectOptions{})
	if !bad || !strings.Contains(out, "ERROR: gmgate cannot decrypt this key: the key is encrypted with cipher CAMELLIA-128-CBC") || strings.Contains(out, "wrong password") {
		t.Errorf("inspect:\n%s", out)
	}
}

// A key in Tongsuo's layout opens through a key reference like any other.
func TestTongsuoFormatKeyOpens(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, false)
	d, err := ca.IssueDual(IssueOptions{DNSNames: []string{"t.example.cn"}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := d.Write(dir, "t", &KeyEncryption{Password: []byte("pw"), Format: KeyFormatTongsuo})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GMGATE_TEST_KEYPW", "pw")
	ref := func(p string) string { return "file:" + p + "?password-env=GMGATE_TEST_KEYPW" }
	if _, err := certs.LoadTLCP(f.SignCert, ref(f.SignKey), f.EncCert, ref(f.EncKey)); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GMGATE_TEST_KEYPW", "not it")
	if _, err := certs.LoadTLCP(f.SignCert, ref(f.SignKey), f.EncCert, ref(f.EncKey)); !errors.Is(err, accel.ErrKeyPassword) {
		t.Errorf("wrong password: %v", err)
	}
}
