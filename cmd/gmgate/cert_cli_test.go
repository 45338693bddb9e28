package main

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/internal/keyenc"
	"github.com/gmgate/gmgate/internal/testopenssl"
)

// gmgate runs the gmgate command in dir (the test's cwd when empty) and
// returns its output and exit code.
func gmgate(t *testing.T, dir string, args ...string) (string, int) {
	t.Helper()
	cmd := gmgateCommand(args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// mustGmgate runs gmgate and fails the test unless it exits 0.
func mustGmgate(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, code := gmgate(t, dir, args...)
	if code != 0 {
		t.Fatalf("gmgate %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// runPrinted runs a "gmgate ..." command line as the output printed it,
// with NAME, DIR and the like replaced.
func runPrinted(t *testing.T, dir, line string, replace ...string) string {
	t.Helper()
	line = strings.NewReplacer(replace...).Replace(strings.TrimSpace(line))
	args := strings.Fields(line)
	if len(args) < 2 || args[0] != "gmgate" {
		t.Fatalf("not a gmgate command: %q", line)
	}
	return mustGmgate(t, dir, args[1:]...)
}

// init-ca for the TLS side suggests cert issue, which issues from it.
func TestCertIssueForTheTLSSide(t *testing.T) {
	for _, kt := range []string{"ecdsa-p256", "rsa-2048"} {
		t.Run(kt, func(t *testing.T) {
			dir := t.TempDir()
			out := mustGmgate(t, dir, "cert", "init-ca", "--out", "tls-ca", "--key-type", kt)
			next := regexp.MustCompile(`next: (gmgate cert issue [^(\n]*)`).FindStringSubmatch(out)
			if next == nil {
				t.Fatalf("no next step:\n%s", out)
			}
			out = runPrinted(t, dir, next[1], "NAME", "legacy.example.com", "DIR", "site")
			certFile, keyFile := filepath.Join("site", "legacy.example.com.crt"), filepath.Join("site", "legacy.example.com.key")
			if !strings.Contains(out, "for the tls side") || !strings.Contains(out, "cert: "+certFile) {
				t.Errorf("issue output:\n%s", out)
			}
			c, err := certs.LoadTLS(filepath.Join(dir, certFile), filepath.Join(dir, keyFile))
			if err != nil {
				t.Fatal(err)
			}
			pool := x509.NewCertPool()
			caPEM, _ := os.ReadFile(filepath.Join(dir, "site", "ca.crt"))
			pool.AppendCertsFromPEM(caPEM)
			if _, err := c.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "legacy.example.com"}); err != nil {
				t.Errorf("the certificate does not verify against the ca.crt written beside it: %v", err)
			}
			want := map[string]string{"ecdsa-p256": "ECDSA P-256", "rsa-2048": "RSA-2048"}[kt]
			if got := pki.DescribePublicKey(c.Leaf.PublicKey); got != want {
				t.Errorf("key %s, want %s", got, want)
			}
		})
	}
	// An SM2 CA refuses a TLS key type with the fix.
	dir := t.TempDir()
	mustGmgate(t, dir, "cert", "init-ca", "--out", "ca")
	out, code := gmgate(t, dir, "cert", "issue", "--ca", "ca", "--dns", "x.example.cn", "--key-type", "rsa-2048", "--out", "site")
	if code == 0 || !strings.Contains(out, "init-ca --key-type rsa-2048") {
		t.Errorf("SM2 CA with --key-type rsa-2048: exit %d\n%s", code, out)
	}
}

// cert csr, then cert sign as printed: the pair loads with the keys of
// the requests; a request that asks for no key usage takes --usage.
func TestCertSignCSR(t *testing.T) {
	dir := t.TempDir()
	mustGmgate(t, dir, "cert", "init-ca", "--out", "ca", "--intermediate")
	mustGmgate(t, dir, "cert", "csr", "--dns", "card.example.cn", "--out", "req")
	out := mustGmgate(t, dir, "cert", "sign", "--ca", "ca", "--csr", "req/card.example.cn.sign.csr", "--csr", "req/card.example.cn.enc.csr", "--out", "site")
	for _, want := range []string{"TLCP signing certificate", "TLCP encryption certificate", "sign_cert: site/card.example.cn.sign.crt", "enc_cert:  site/card.example.cn.enc.crt"} {
		if !strings.Contains(out, want) {
			t.Errorf("sign output lacks %q:\n%s", want, out)
		}
	}
	at := func(p string) string { return filepath.Join(dir, p) }
	roots, err := certs.ReadRoots(at("site/ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	_, warnings, err := certs.LoadTLCPFiles(certs.TLCPFiles{
		SignCert: at("site/card.example.cn.sign.crt"), SignKey: at("req/card.example.cn.sign.key"),
		EncCert: at("site/card.example.cn.enc.crt"), EncKey: at("req/card.example.cn.enc.key"),
	}, certs.LoadOptions{Roots: roots})
	if err != nil || len(warnings) > 0 {
		t.Fatalf("signed pair: %v %v", err, warnings)
	}
	// Signing again refuses to overwrite.
	if out, code := gmgate(t, dir, "cert", "sign", "--ca", "ca", "--csr", "req/card.example.cn.sign.csr", "--out", "site"); code == 0 || !strings.Contains(out, "already exists") {
		t.Errorf("overwrite: exit %d\n%s", code, out)
	}
	// Two requests for the same role.
	if out, code := gmgate(t, dir, "cert", "sign", "--ca", "ca", "--csr", "req/card.example.cn.sign.csr", "--csr", "req/card.example.cn.sign.csr", "--out", "again"); code == 0 || !strings.Contains(out, "a second request for the sign certificate") {
		t.Errorf("two signing requests: exit %d\n%s", code, out)
	}
	// A request made elsewhere (OpenSSL, as a card vendor's tool would)
	// without key usage: --usage decides.
	bin := testopenssl.Bin(t)
	testopenssl.Run(t, bin, dir, "genpkey", "-algorithm", "SM2", "-out", "card.key")
	testopenssl.Run(t, bin, dir, "req", "-new", "-key", "card.key", "-sm3", "-sigopt", "distid:1234567812345678", "-subj", "/CN=card.example.cn", "-addext", "subjectAltName=DNS:card.example.cn", "-out", "card.csr")
	if out, code := gmgate(t, dir, "cert", "sign", "--ca", "ca", "--csr", "card.csr"); code == 0 || !strings.Contains(out, "give --usage sign or --usage enc") {
		t.Errorf("request without key usage: exit %d\n%s", code, out)
	}
	out = mustGmgate(t, dir, "cert", "sign", "--ca", "ca", "--csr", "card.csr", "--usage", "sign")
	if !strings.Contains(out, "TLCP signing certificate") || !strings.Contains(out, "wrote card.crt") {
		t.Errorf("--usage sign:\n%s", out)
	}
	out, code := gmgate(t, dir, "cert", "inspect", "--ca", "ca/ca.crt", "card.crt", "card.key")
	if code != 0 || !strings.Contains(out, "SM2 signing certificate") || !strings.Contains(out, "belongs to:") {
		t.Errorf("inspect the signed card certificate: exit %d\n%s", code, out)
	}
}

func TestCertDaysMustBePositive(t *testing.T) {
	dir := t.TempDir()
	mustGmgate(t, dir, "cert", "init-ca", "--out", "ca")
	mustGmgate(t, dir, "cert", "csr", "--dns", "d.example.cn", "--out", "req")
	for _, args := range [][]string{
		{"cert", "issue", "--ca", "ca", "--dns", "d.example.cn", "--out", "site", "--days", "0"},
		{"cert", "issue", "--ca", "ca", "--dns", "d.example.cn", "--out", "site", "--days", "-30"},
		{"cert", "issue", "--ca", "ca", "--dns", "d.example.cn", "--out", "site", "--days", "4000"},
		{"cert", "init-ca", "--out", "ca2", "--days", "0"},
		{"cert", "sign", "--ca", "ca", "--csr", "req/d.example.cn.sign.csr", "--days", "0"},
	} {
		out, code := gmgate(t, dir, args...)
		if code == 0 || !strings.Contains(out, "give a number of days from 1 to 3653") {
			t.Errorf("%v: exit %d\n%s", args, code, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "site")); err == nil {
		t.Error("a refused issue wrote files")
	}
	out := mustGmgate(t, dir, "cert", "issue", "--ca", "ca", "--dns", "d.example.cn", "--out", "site", "--days", "30")
	c, err := certs.LoadTLCP(filepath.Join(dir, "site/d.example.cn.sign.crt"), filepath.Join(dir, "site/d.example.cn.sign.key"), filepath.Join(dir, "site/d.example.cn.enc.crt"), filepath.Join(dir, "site/d.example.cn.enc.key"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if days := c.SignLeaf.NotAfter.Sub(c.SignLeaf.NotBefore).Hours() / 24; days != 30 {
		t.Errorf("--days 30 issued %v days", days)
	}
}

// An RSA certificate given as sign_cert: the error's hint works as printed,
// and what it prints next works too.
func TestCertMigrateHintWorksAsPrinted(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writeRSACert(t, dir, "legacy.example.cn")
	_, err := certs.LoadTLCP(certFile, keyFile, certFile, keyFile)
	if err == nil {
		t.Fatal("an RSA certificate loaded as sign_cert")
	}
	hint := regexp.MustCompile(`gmgate cert migrate --from \S+`).FindString(err.Error())
	if hint == "" {
		t.Fatalf("no migrate hint in %q", err)
	}
	out := runPrinted(t, dir, hint)
	for _, f := range []string{"legacy.example.cn.sign.csr", "legacy.example.cn.enc.csr", "legacy.example.cn.sign.key", "legacy.example.cn.enc.key"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s not written: %v\n%s", f, err, out)
		}
	}
	mustGmgate(t, dir, "cert", "init-ca", "--out", "ca")
	next := regexp.MustCompile(`gmgate cert sign --ca DIR [^\n]*`).FindString(out)
	if next == "" {
		t.Fatalf("no next step:\n%s", out)
	}
	runPrinted(t, dir, next, "DIR", "ca")
	at := func(p string) string { return filepath.Join(dir, p) }
	if _, err := certs.LoadTLCP(at("legacy.example.cn.sign.crt"), at("legacy.example.cn.sign.key"), at("legacy.example.cn.enc.crt"), at("legacy.example.cn.enc.key")); err != nil {
		t.Fatalf("the migrated pair: %v", err)
	}
}

// --key-format chooses the PRF identifier of encrypted keys; gmgate reads
// both, and inspect says who else does.
func TestCertKeyFormat(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "pw"), []byte("key password\n"), 0o600)
	mustGmgate(t, dir, "cert", "init-ca", "--out", "ca")
	for _, tc := range []struct{ format, prf, readBy string }{
		{"gmssl", "1.2.156.10197.1.401.2", "gmgate, GmSSL"},
		{"tongsuo", "1.2.156.10197.1.401.3.1", "gmgate, Tongsuo"},
	} {
		t.Run(tc.format, func(t *testing.T) {
			out := filepath.Join(dir, tc.format)
			mustGmgate(t, dir, "cert", "issue", "--ca", "ca", "--dns", "k.example.cn", "--out", out, "--key-password-file", "pw", "--key-format", tc.format)
			data, _ := os.ReadFile(filepath.Join(out, "k.example.cn.enc.key"))
			block, _ := pem.Decode(data)
			in, err := keyenc.Describe(block.Bytes)
			if err != nil || in.PRF.String() != tc.prf {
				t.Fatalf("written with PRF %v (%v)", in.PRF, err)
			}
			text := mustGmgate(t, dir, "cert", "inspect", "--key-password-file", "pw", filepath.Join(out, "k.example.cn.enc.crt"), filepath.Join(out, "k.example.cn.enc.key"))
			if !strings.Contains(text, "readable by:       "+tc.readBy) || !strings.Contains(text, "belongs to:") {
				t.Errorf("inspect:\n%s", text)
			}
			ref := func(f string) string {
				return "file:" + filepath.Join(out, f) + "?password-file=" + filepath.Join(dir, "pw")
			}
			if _, err := certs.LoadTLCP(filepath.Join(out, "k.example.cn.sign.crt"), ref("k.example.cn.sign.key"), filepath.Join(out, "k.example.cn.enc.crt"), ref("k.example.cn.enc.key")); err != nil {
				t.Errorf("load: %v", err)
			}
		})
	}
	for _, args := range [][]string{
		{"cert", "issue", "--ca", "ca", "--dns", "k.example.cn", "--out", "bad", "--key-password-file", "pw", "--key-format", "pkcs12"},
		{"cert", "issue", "--ca", "ca", "--dns", "k.example.cn", "--out", "bad", "--key-format", "tongsuo"},
	} {
		if out, code := gmgate(t, dir, args...); code == 0 {
			t.Errorf("%v accepted:\n%s", args, out)
		}
	}
}

// ca.crt beside issued files is the root of the CA that issued them: a
// ca.crt of another CA there (an SM2 pair's, or a CA directory's own) is
// not replaced without --force; the same CA's is.
func TestCertKeepsAnotherCAsCertificate(t *testing.T) {
	dir := t.TempDir()
	at := func(p string) string { return filepath.Join(dir, p) }
	mustGmgate(t, dir, "cert", "init-ca", "--out", "ca")
	mustGmgate(t, dir, "cert", "init-ca", "--out", "tls-ca", "--key-type", "ecdsa-p256")
	mustGmgate(t, dir, "cert", "issue", "--ca", "ca", "--dns", "a.example.cn", "--out", "site")
	mustGmgate(t, dir, "cert", "csr", "--dns", "b.example.cn", "--out", "req")
	legacy, _ := writeRSACert(t, dir, "legacy.example.cn")
	sm2Root, _ := os.ReadFile(at("ca/ca.crt"))
	for _, c := range []struct {
		file string
		args []string
	}{
		{"site/ca.crt", []string{"cert", "issue", "--ca", "tls-ca", "--dns", "a.example.cn", "--out", "site"}},
		{"ca/ca.crt", []string{"cert", "issue", "--ca", "tls-ca", "--dns", "b.example.cn", "--out", "ca"}},
		{"tls-ca/ca.crt", []string{"cert", "sign", "--ca", "ca", "--csr", "req/b.example.cn.sign.csr", "--out", "tls-ca"}},
		{"tls-ca/ca.crt", []string{"cert", "migrate", "--from", legacy, "--ca", "ca", "--out", "tls-ca"}},
	} {
		before, _ := os.ReadFile(at(c.file))
		out, code := gmgate(t, dir, c.args...)
		if code == 0 || !strings.Contains(out, c.file) || !strings.Contains(out, "another CA") || !strings.Contains(out, "--force") {
			t.Errorf("%v: exit %d\n%s", c.args, code, out)
		}
		if after, _ := os.ReadFile(at(c.file)); string(after) != string(before) {
			t.Errorf("%v replaced %s", c.args, c.file)
		}
	}
	// The same CA again, and --force.
	mustGmgate(t, dir, "cert", "issue", "--ca", "ca", "--dns", "c.example.cn", "--out", "site")
	mustGmgate(t, dir, "cert", "issue", "--ca", "tls-ca", "--dns", "a.example.cn", "--out", "site", "--force")
	if after, _ := os.ReadFile(at("site/ca.crt")); string(after) == string(sm2Root) {
		t.Error("--force did not write ca.crt")
	}
}

// An encrypted CA key without its password, or with a wrong one, is told
// in the command's own terms: the --ca-key-password-file flag, not the
// key reference parameters of the configuration file.
func TestCertEncryptedCAKeyNamesTheFlag(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "pw"), []byte("right password"), 0o600)
	os.WriteFile(filepath.Join(dir, "wrong"), []byte("wrong password"), 0o600)
	mustGmgate(t, dir, "cert", "init-ca", "--out", "ca", "--key-password-file", "pw")
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "is encrypted; give its password with --ca-key-password-file FILE"},
		{[]string{"--ca-key-password-file", "wrong"}, "wrong password"},
	} {
		args := append([]string{"cert", "issue", "--ca", "ca", "--dns", "a.example.cn", "--out", "site"}, c.args...)
		out, code := gmgate(t, dir, args...)
		if code == 0 || !strings.Contains(out, c.want) || !strings.Contains(out, "--ca-key-password-file") || strings.Contains(out, "password-env") {
			t.Errorf("%v: exit %d\n%s", c.args, code, out)
		}
	}
	mustGmgate(t, dir, "cert", "issue", "--ca", "ca", "--dns", "a.example.cn", "--out", "site", "--ca-key-password-file", "pw")
}

// A name that is no DNS name is refused with the rule it breaks; the names
// a certificate can carry are issued.
func TestCertIssueDNSNameRule(t *testing.T) {
	dir := t.TempDir()
	mustGmgate(t, dir, "cert", "init-ca", "--out", "ca")
	for name, want := range map[string]string{
		"bad name!":        `DNS name "bad name!" has ' ', which a DNS name cannot hold; a DNS name is labels of letters, digits and hyphens joined by dots, with a wildcard (*) only as the whole first label`,
		"api.example.cn.":  "ends with a dot: drop it",
		"api..example.cn":  "has an empty label",
		"a.*.example.cn":   "has a wildcard that is not the whole first label",
		"*x.example.cn":    "has a wildcard that is not the whole first label",
		"-api.example.cn":  "starts or ends with a hyphen",
		"bücher.example":   "has 'ü', a character outside ASCII",
		"api.example.cn\t": `has '\t', which a DNS name cannot hold`,
	} {
		out, code := gmgate(t, dir, "cert", "issue", "--ca", "ca", "--dns", name, "--out", "site")
		if code == 0 || !strings.Contains(out, want) || !strings.Contains(out, "(xn--...)") || strings.Contains(out, "printable ASCII") {
			t.Errorf("%q: exit %d, want %q in\n%s", name, code, want, out)
		}
	}
	mustGmgate(t, dir, "cert", "issue", "--ca", "ca", "--dns", "*.static.example.cn", "--dns", "xn--bcher-kva.example", "--dns", "db_1.internal", "--out", "site")
}

// cert verify with the wrong CA says so, and tells it apart from a chain
// that stops at an intermediate.
func TestCertVerifyWrongCA(t *testing.T) {
	dir := t.TempDir()
	mustGmgate(t, dir, "cert", "init-ca", "--out", "ca")
	mustGmgate(t, dir, "cert", "init-ca", "--out", "other", "--cn", "Other Root CA")
	mustGmgate(t, dir, "cert", "init-ca", "--out", "same", "--intermediate")
	mustGmgate(t, dir, "cert", "init-ca", "--out", "ica", "--intermediate", "--cn", "Tier Root CA")
	mustGmgate(t, dir, "cert", "issue", "--ca", "ca", "--dns", "a.example.cn", "--out", "site")
	mustGmgate(t, dir, "cert", "issue", "--ca", "ica", "--dns", "b.example.cn", "--out", "chained")
	leaf, chained := "site/a.example.cn.sign.crt", "chained/b.example.cn.sign.crt"
	for _, tc := range []struct {
		ca, cert string
		want     []string
	}{
		// A leaf alone whose issuer is not trusted.
		{"other/ca.crt", leaf, []string{`unknown issuer: the issuer "CN=gmgate local SM2 root CA" (key id `, `is none of the trusted CAs, by name or key id (trusted: "CN=Other Root CA" (key id `, "if \"CN=gmgate local SM2 root CA\" is a root CA, trust its certificate instead (the CA given is the wrong one)"}},
		// Another CA of the same name.
		{"same/ca.crt", leaf, []string{`was issued by another CA of the name "CN=gmgate local SM2 root CA" than the trusted one`, "trust the CA certificate that issued it"}},
		// The file holds the intermediate, whose issuer is not trusted.
		{"other/ca.crt", chained, []string{`unknown issuer: the chain in the file stops at the intermediate "CN=Tier Root CA - intermediate", and its issuer "CN=Tier Root CA" is none of the trusted CAs`}},
	} {
		out, code := gmgate(t, dir, "cert", "verify", "--ca", tc.ca, tc.cert)
		if code == 0 || strings.Contains(out, "append the intermediate CA certificate") {
			t.Errorf("--ca %s %s: exit %d\n%s", tc.ca, tc.cert, code, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("--ca %s %s: want %q in\n%s", tc.ca, tc.cert, w, out)
			}
		}
	}
	mustGmgate(t, dir, "cert", "verify", "--ca", "ica/ca.crt", chained)
	if out, code := gmgate(t, dir, "cert", "verify", "--ca", "missing.crt", leaf); code == 0 || !strings.Contains(out, "--ca missing.crt does not exist; give the path of the PEM file of the CA certificates") {
		t.Errorf("a missing --ca: exit %d\n%s", code, out)
	}
}

// A file that is no certificate request is named as such, with what to
// give, and without the parser's ASN.1 detail.
func TestCertSignGarbageCSR(t *testing.T) {
	dir := t.TempDir()
	mustGmgate(t, dir, "cert", "init-ca", "--out", "ca")
	if err := os.WriteFile(filepath.Join(dir, "garbage.csr"), []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cut.csr"), []byte("-----BEGIN CERTIFICATE REQUEST-----\nZ2FyYmFnZQ==\n-----END CERTIFICATE REQUEST-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		"garbage.csr": "garbage.csr is not a certificate request: give a PKCS#10 request, PEM (-----BEGIN CERTIFICATE REQUEST-----) or DER",
		"cut.csr":     "cut.csr: its CERTIFICATE REQUEST block is not a PKCS#10 request (damaged, or cut short); make the request again",
	} {
		out, code := gmgate(t, dir, "cert", "sign", "--ca", "ca", "--csr", file)
		if code == 0 || !strings.Contains(out, want) || strings.Contains(out, "asn1") {
			t.Errorf("%s: exit %d, want %q in\n%s", file, code, want, out)
		}
	}
}
