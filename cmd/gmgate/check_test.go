package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs/pki"
	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

// checkPKI is what the broken configurations are made of.
type checkPKI struct {
	dir                  string
	good, other, expired pki.DualFiles
	encrypted            pki.DualFiles // keys encrypted with "right password"
	tlsCert, tlsKey      string        // ECDSA, for the tls side
	rsaCert, rsaKey      string
}

func newCheckPKI(t *testing.T) *checkPKI {
	t.Helper()
	dir := t.TempDir()
	p := &checkPKI{dir: dir}
	ca, err := pki.NewCA(pki.CAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	issue := func(name string, password []byte) pki.DualFiles {
		pair, err := ca.IssueDual(pki.IssueOptions{DNSNames: []string{"localhost"}})
		if err != nil {
			t.Fatal(err)
		}
		f, err := pair.Write(dir, name, &pki.KeyEncryption{Password: password})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	p.good = issue("good", nil)
	p.other = issue("other", nil)
	p.encrypted = issue("encrypted", []byte("right password"))
	past := func() time.Time { return time.Now().Add(-400 * 24 * time.Hour) }
	oldCA, err := pki.NewCA(pki.CAOptions{Now: past})
	if err != nil {
		t.Fatal(err)
	}
	old, err := oldCA.IssueDual(pki.IssueOptions{DNSNames: []string{"localhost"}, Validity: 30 * 24 * time.Hour, Now: past})
	if err != nil {
		t.Fatal(err)
	}
	if p.expired, err = old.Write(dir, "expired", nil); err != nil {
		t.Fatal(err)
	}
	tlsCA, err := pki.NewCA(pki.CAOptions{KeyAlgorithm: pki.KeyECDSAP256})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := tlsCA.IssueTLS(pki.IssueOptions{DNSNames: []string{"localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.tlsCert, p.tlsKey, err = leaf.Write(dir, "tls", nil); err != nil {
		t.Fatal(err)
	}
	p.rsaCert, p.rsaKey = writeRSACert(t, dir, "localhost")
	return p
}

// writeRSACert writes a self-signed RSA server certificate for cn and its
// key, as a legacy site has them.
func writeRSACert(t testing.TB, dir, cn string) (string, string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: cn}, DNSNames: []string{cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "rsa.crt"), filepath.Join(dir, "rsa.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// listenerYAML is one auto listener entry.
type listenerYAML struct {
	name, listen                       string
	signCert, signKey, encCert, encKey string
	tlsCert, tlsKey                    string
}

func (p *checkPKI) listener(name, listen string) listenerYAML {
	return listenerYAML{name: name, listen: listen,
		signCert: p.good.SignCert, signKey: p.good.SignKey, encCert: p.good.EncCert, encKey: p.good.EncKey,
		tlsCert: p.tlsCert, tlsKey: p.tlsKey}
}

func configYAML(admin string, ls ...listenerYAML) string {
	var b strings.Builder
	fmt.Fprintf(&b, "admin: {listen: %q}\nlog: {access: \"off\"}\nlisteners:\n", admin)
	for _, l := range ls {
		fmt.Fprintf(&b, `  - name: %s
    listen: %q
    tlcp:
      sign_cert: %s
      sign_key: %s
      enc_cert: %s
      enc_key: %s
    tls:
      cert: %s
      key: %s
    routes: [{upstream: app}]
`, l.name, l.listen, l.signCert, l.signKey, l.encCert, l.encKey, l.tlsCert, l.tlsKey)
	}
	b.WriteString("upstreams:\n  app: {targets: [\"http://127.0.0.1:1\"]}\n")
	return b.String()
}

// problemLines are the lines of a configuration report that name the file.
func problemLines(out, file string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "  "+file+":") {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	slices.Sort(lines)
	return lines
}

// damagedKey writes a copy of the encrypted key file src whose
// ciphertext lacks its last byte (no longer whole SM4 blocks), and
// returns its path.
func damagedKey(t *testing.T, src string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	var info, alg cryptobyte.String
	var ct []byte
	s := cryptobyte.String(block.Bytes)
	if block.Type != "ENCRYPTED PRIVATE KEY" || !s.ReadASN1(&info, cbasn1.SEQUENCE) ||
		!info.ReadASN1Element(&alg, cbasn1.SEQUENCE) || !info.ReadASN1Bytes(&ct, cbasn1.OCTET_STRING) {
		t.Fatalf("%s is not an encrypted PKCS#8 key", src)
	}
	var b cryptobyte.Builder
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddBytes(alg)
		b.AddASN1OctetString(ct[:len(ct)-1])
	})
	block.Bytes = b.BytesOrPanic()
	dst := filepath.Join(t.TempDir(), "damaged.key")
	if err := os.WriteFile(dst, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	return dst
}

// runGmgate runs a gmgate command to its end (bounded), with extra
// environment.
func runGmgate(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := gmgateCommand(args...)
	cmd = exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	cmd.Env = append(append(os.Environ(), "GMGATE_HELPER_PROCESS=1"), env...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("gmgate %v did not end (it serves?):\n%s", args, out)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// config check and serve agree on broken configurations: check fails
// listing every problem, serve does not start and lists the same, and
// both exit with the same status: exitConfig, or 1 when every problem may
// clear by itself (an address in use), so that a service manager retries
// only those.
func TestCheckAndServeAgree(t *testing.T) {
	p := newCheckPKI(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	_, busyPort, _ := net.SplitHostPort(busy.Addr().String())
	free := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		return port
	}
	const admin = "127.0.0.1:0"
	edge := func(mod func(*listenerYAML)) listenerYAML {
		l := p.listener("edge", "127.0.0.1:0")
		mod(&l)
		return l
	}
	const pwVar = "GMGATE_TEST_KEY_PASSWORD"
	missing := filepath.Join(p.dir, "missing.crt")
	damaged := damagedKey(t, p.encrypted.SignKey)
	port := free()
	cases := []struct {
		name string
		yaml string
		env  []string
		want []string // problem lines contain these, in file order
	}{
		{"missing certificate file", configYAML(admin, edge(func(l *listenerYAML) { l.signCert = missing })), nil,
			[]string{"listeners[0].tlcp.sign_cert: sign_cert " + missing + " does not exist"}},
		{"expired certificate", configYAML(admin, edge(func(l *listenerYAML) {
			l.signCert, l.signKey, l.encCert, l.encKey = p.expired.SignCert, p.expired.SignKey, p.expired.EncCert, p.expired.EncKey
		})), nil, []string{
			"listeners[0].tlcp.sign_cert: sign_cert " + p.expired.SignCert + " expired on",
			"listeners[0].tlcp.enc_cert: enc_cert " + p.expired.EncCert + " expired on",
		}},
		{"wrong key password", configYAML(admin, edge(func(l *listenerYAML) {
			l.signCert, l.signKey, l.encCert = p.encrypted.SignCert, "file:"+p.encrypted.SignKey+"?password-env="+pwVar, p.encrypted.EncCert
			l.encKey = "file:" + p.encrypted.EncKey + "?password-env=" + pwVar
		})), []string{pwVar + "=wrong password"}, []string{
			"listeners[0].tlcp.sign_key: sign_key:", "check the password that password-env or password-file gives",
			"listeners[0].tlcp.enc_key: enc_key:",
		}},
		{"damaged encrypted key", configYAML(admin, edge(func(l *listenerYAML) {
			l.signCert, l.signKey = p.encrypted.SignCert, "file:"+damaged+"?password-env="+pwVar
		})), []string{pwVar + "=right password"}, []string{
			"listeners[0].tlcp.sign_key: sign_key:", damaged, "damaged key file: the encrypted key does not fit SM4-CBC",
		}},
		{"unset key password", configYAML(admin, edge(func(l *listenerYAML) {
			l.signCert, l.signKey = p.encrypted.SignCert, "file:"+p.encrypted.SignKey+"?password-env="+pwVar
		})), nil, []string{"listeners[0].tlcp.sign_key: sign_key:", pwVar}},
		{"swapped sign/enc pair", configYAML(admin, edge(func(l *listenerYAML) {
			l.signCert, l.signKey, l.encCert, l.encKey = p.good.EncCert, p.good.EncKey, p.good.SignCert, p.good.SignKey
		})), nil, []string{"listeners[0].tlcp: sign_cert " + p.good.EncCert + " and enc_cert " + p.good.SignCert + " are swapped"}},
		{"key from another pair", configYAML(admin, edge(func(l *listenerYAML) { l.encKey = p.other.EncKey })), nil,
			[]string{"listeners[0].tlcp.enc_key: enc_key " + p.other.EncKey + " does not belong to enc_cert " + p.good.EncCert}},
		{"RSA certificate as sign_cert", configYAML(admin, edge(func(l *listenerYAML) { l.signCert, l.signKey = p.rsaCert, p.rsaKey })), nil,
			[]string{"listeners[0].tlcp.sign_cert: sign_cert " + p.rsaCert + ": the certificate has an RSA-2048 key, but TLCP needs SM2 certificates"}},
		{"RSA key as sign_key, with a key from another pair", configYAML(admin, edge(func(l *listenerYAML) { l.signKey, l.encKey = p.rsaKey, p.other.EncKey })), nil, []string{
			"listeners[0].tlcp.sign_key: sign_key " + p.rsaKey + " is an RSA-2048 key; TLCP needs SM2 keys",
			"listeners[0].tlcp.enc_key: enc_key " + p.other.EncKey + " does not belong to enc_cert " + p.good.EncCert,
		}},
		{"SM2 certificate on the TLS side", configYAML(admin, edge(func(l *listenerYAML) { l.tlsCert, l.tlsKey = p.good.SignCert, p.good.SignKey })), nil,
			[]string{"listeners[0].tls.cert: cert " + p.good.SignCert + " is an SM2 certificate, which TLS clients cannot use"}},
		{"port in use", configYAML(admin, edge(func(l *listenerYAML) { l.listen = busy.Addr().String() })), nil,
			[]string{"listeners[0].listen: " + busy.Addr().String() + " is already in use; stop what listens there (`ss -ltnp 'sport = :" + busyPort + "'` shows it)"}},
		{"admin.listen on a listener's address", configYAML("127.0.0.1:"+port, edge(func(l *listenerYAML) { l.listen = "127.0.0.1:" + port })), nil,
			[]string{`admin.listen: "127.0.0.1:` + port + `" is also the address of listeners[0]`}},
		{"wildcard next to a specific address", configYAML(admin, edge(func(l *listenerYAML) { l.listen = ":" + port }), p.listener("second", "127.0.0.1:"+port)), nil,
			[]string{`listeners[1].listen: "127.0.0.1:` + port + `" and ":` + port + `" of listeners[0] share a port`}},
		{"bad sdf library", configYAML(admin, edge(func(l *listenerYAML) {
			l.encKey = "sdf:/nonexistent/libsdf.so?index=1&key=enc&pin-env=GMGATE_TEST_PIN"
		})), []string{"GMGATE_TEST_PIN=12345678"}, []string{"listeners[0].tlcp.enc_key: enc_key:", "/nonexistent/libsdf.so"}},
		{"three at once", configYAML(admin,
			edge(func(l *listenerYAML) { l.signCert = missing; l.tlsCert, l.tlsKey = p.good.SignCert, p.good.SignKey }),
			p.listener("second", busy.Addr().String())), nil, []string{
			"listeners[0].tlcp.sign_cert: sign_cert " + missing + " does not exist",
			"listeners[0].tls.cert: cert " + p.good.SignCert + " is an SM2 certificate",
			"listeners[1].listen: " + busy.Addr().String() + " is already in use",
		}},
		{"file problems beside certificate and address problems", configYAML("127.0.0.1",
			edge(func(l *listenerYAML) { l.signCert = missing }),
			func() listenerYAML {
				l := p.listener("second", busy.Addr().String())
				l.tlsCert, l.tlsKey = p.good.SignCert, p.good.SignKey
				return l
			}()), nil, []string{
			"listeners[0].tlcp.sign_cert: sign_cert " + missing + " does not exist",
			"listeners[1].listen: " + busy.Addr().String() + " is already in use",
			`admin.listen: "127.0.0.1"`,
			"listeners[1].tls.cert: cert " + p.good.SignCert + " is an SM2 certificate",
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "gmgate.yaml")
			if err := os.WriteFile(file, []byte(c.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			code := exitConfig
			if c.name == "port in use" {
				code = 1
			}
			checkOut, checkCode := runGmgate(t, c.env, "config", "check", "-c", file)
			if checkCode != code {
				t.Fatalf("config check exit %d, want %d:\n%s", checkCode, code, checkOut)
			}
			serveOut, serveCode := runGmgate(t, c.env, "serve", "-c", file)
			if serveCode != code || strings.Contains(serveOut, `"msg":"listening"`) || strings.Contains(serveOut, `"msg":"gmgate started"`) {
				t.Fatalf("serve exit %d, want %d, or it served:\n%s", serveCode, code, serveOut)
			}
			checked, serving := problemLines(checkOut, file), problemLines(serveOut, file)
			if !slices.Equal(checked, serving) {
				t.Errorf("check and serve disagree:\ncheck:\n  %s\nserve:\n  %s", strings.Join(checked, "\n  "), strings.Join(serving, "\n  "))
			}
			all := strings.Join(checked, "\n")
			for _, w := range c.want {
				if !strings.Contains(all, w) {
					t.Errorf("problems lack %q:\n%s", w, checkOut)
				}
			}
			if !strings.Contains(checkOut, fmt.Sprintf("configuration has %d problem", len(checked))) {
				t.Errorf("no count of problems:\n%s", checkOut)
			}
		})
	}
}

// --offline checks the certificates but opens no key, card or secret and
// binds nothing: what a CI pipeline without the secrets can check.
func TestCheckOffline(t *testing.T) {
	p := newCheckPKI(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	l := p.listener("edge", busy.Addr().String())
	l.signCert, l.signKey = p.encrypted.SignCert, "file:"+p.encrypted.SignKey+"?password-env=GMGATE_TEST_UNSET"
	l.encCert, l.encKey = p.encrypted.EncCert, "sdf:/nonexistent/libsdf.so?index=1&key=enc&pin-env=GMGATE_TEST_UNSET"
	file := filepath.Join(t.TempDir(), "gmgate.yaml")
	if err := os.WriteFile(file, []byte(configYAML("127.0.0.1:0", l)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := runGmgate(t, nil, "config", "check", "--offline", "-c", file)
	if code != 0 || !strings.Contains(out, file+": ok (1 listener, 1 upstream)") || !strings.Contains(out, "not checked (--offline): private keys") {
		t.Errorf("offline check: exit %d\n%s", code, out)
	}
	// Offline still reads the certificates.
	l.tlsCert = p.good.SignCert
	if err := os.WriteFile(file, []byte(configYAML("127.0.0.1:0", l)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = runGmgate(t, nil, "config", "check", "--offline", "-c", file)
	if code != exitConfig || !strings.Contains(out, "listeners[0].tls.cert: cert "+p.good.SignCert+" is an SM2 certificate") {
		t.Errorf("offline check of a bad certificate: exit %d\n%s", code, out)
	}
	// Online, the same file has its key, card and address problems too.
	out, code = runGmgate(t, nil, "config", "check", "-c", file)
	for _, want := range []string{"listeners[0].listen:", "listeners[0].tlcp.sign_key:", "listeners[0].tlcp.enc_key:"} {
		if code != exitConfig || !strings.Contains(out, want) {
			t.Errorf("online check lacks %q (exit %d):\n%s", want, code, out)
		}
	}
}

// --pid names the running gmgate, whose ports count as free. A process ID
// that names no process (a stale $MAINPID, a typo) is an error rather
// than ignored: the check would otherwise report the running gateway's
// own ports as in use, or pass without the reload's premise.
func TestCheckPID(t *testing.T) {
	p := newCheckPKI(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	file := filepath.Join(t.TempDir(), "gmgate.yaml")
	if err := os.WriteFile(file, []byte(configYAML("off", p.listener("edge", busy.Addr().String()))), 0o600); err != nil {
		t.Fatal(err)
	}
	// This test's process holds the port, as the running gmgate would.
	out, code := runGmgate(t, nil, "config", "check", "-c", file, "--pid", strconv.Itoa(os.Getpid()))
	if code != 0 || !strings.Contains(out, file+": ok") {
		t.Errorf("--pid of the process that holds the port: exit %d\n%s", code, out)
	}
	// Above Linux's PID_MAX_LIMIT (2^22): no process has it.
	const none = 1 << 30
	for _, pid := range []string{strconv.Itoa(none), "-5"} {
		out, code = runGmgate(t, nil, "config", "check", "-c", file, "--pid", pid)
		if code == 0 || !strings.Contains(out, "--pid "+pid) || !strings.Contains(out, "pidof gmgate") {
			t.Errorf("--pid %s: exit %d, want an error naming --pid and how to find the process:\n%s", pid, code, out)
		}
	}
}

// --offline opens no key, but a key file that is not on this machine is
// said, as a warning at its field, next to whatever else is wrong: a
// missing certificate and a missing key are both in one report.
func TestCheckOfflineNamesAbsentKeyFiles(t *testing.T) {
	p := newCheckPKI(t)
	dir := t.TempDir()
	l := p.listener("edge", "127.0.0.1:0")
	l.tlsKey = filepath.Join(dir, "missing.key")
	l.encKey = "file:" + filepath.Join(dir, "missing-enc.key") + "?password-env=GMGATE_TEST_UNSET"
	file := filepath.Join(dir, "gmgate.yaml")
	if err := os.WriteFile(file, []byte(configYAML("off", l)), 0o600); err != nil {
		t.Fatal(err)
	}
	wantWarnings := []string{
		file + ":10: listeners[0].tlcp.enc_key: key file " + filepath.Join(dir, "missing-enc.key") + " is not on this machine",
		file + ":13: listeners[0].tls.key: key file " + filepath.Join(dir, "missing.key") + " is not on this machine",
	}
	out, code := runGmgate(t, nil, "config", "check", "--offline", "-c", file)
	if code != 0 || !strings.Contains(out, file+": ok") {
		t.Errorf("offline check: exit %d, want 0 (the keys are not opened):\n%s", code, out)
	}
	for _, w := range wantWarnings {
		if !strings.Contains(out, "warning: "+w) {
			t.Errorf("offline check lacks the warning %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, p.good.SignKey) {
		t.Errorf("a key file that is there is named:\n%s", out)
	}

	l.tlsCert = filepath.Join(dir, "missing.crt")
	if err := os.WriteFile(file, []byte(configYAML("off", l)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = runGmgate(t, nil, "config", "check", "--offline", "-c", file)
	if code != exitConfig || !strings.Contains(out, "listeners[0].tls.cert: cert "+l.tlsCert+" does not exist") {
		t.Errorf("offline check of a missing certificate: exit %d\n%s", code, out)
	}
	for _, w := range wantWarnings {
		if !strings.Contains(out, "warning: "+w) {
			t.Errorf("with a missing certificate, the offline check lacks the warning %q:\n%s", w, out)
		}
	}
}
