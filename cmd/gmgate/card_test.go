//go:build cgo

package main

import (
	"bufio"
	"crypto/ecdsa"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gmgate/gmgate/internal/softsdf"
	"github.com/gmgate/gmgate/internal/testpki"
	"github.com/gmgate/gmgate/tlcp"
)

// cardSetup is a software crypto card (softsdf) holding the server's TLCP
// keys at index 1, with their certificates, and a client identity.
type cardSetup struct {
	dir, lib string
	card     *softsdf.Card
	ca       *testpki.CA
	caFile   string
	// signCert and encCert are the certificates of the card's keys;
	// fileEncCert and fileEncKey an encryption pair held in a file,
	// encrypted with the card's PIN.
	signCert, encCert, fileEncCert, fileEncKey string
	client                                     tlcp.Certificate
}

func newCardSetup(t *testing.T) *cardSetup {
	t.Helper()
	if err := softsdf.Available(); err != nil {
		t.Skipf("cannot build the software SDF library: %v", err)
	}
	s := &cardSetup{dir: t.TempDir()}
	var err error
	if s.lib, err = softsdf.Build(s.dir, "libsoftsdf.so"); err != nil {
		t.Fatal(err)
	}
	keyDir := filepath.Join(s.dir, "card")
	if err := os.Mkdir(keyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	s.card = softsdf.NewCard(t, keyDir, "11223344", 1)
	s.ca = testpki.NewCA(t, "gmgate card test CA")
	s.caFile = s.writePEM(t, "ca.crt", s.ca.Cert.Raw)
	issue := func(name string, pub *ecdsa.PublicKey, enc bool) string {
		der := s.ca.Issue(t, testpki.Template("localhost", []string{"localhost"}, enc), pub)
		return s.writePEM(t, name, der)
	}
	s.signCert = issue("card.sign.crt", &s.card.Sign[1].PublicKey, false)
	s.encCert = issue("card.enc.crt", &s.card.Enc[1].PublicKey, true)
	fileDir := filepath.Join(s.dir, "keys")
	if err := os.Mkdir(fileDir, 0o700); err != nil {
		t.Fatal(err)
	}
	k := softsdf.GenerateKey(t, fileDir, "enc", s.card.PIN)
	s.fileEncKey = filepath.Join(fileDir, "enc.pem")
	s.fileEncCert = issue("file.enc.crt", &k.PublicKey, true)
	c := s.ca.IssueDual(t, "client.test", nil, nil)
	s.client = tlcp.Certificate{SignCertificate: [][]byte{c.SignCert}, SignKey: c.SignKey, EncCertificate: [][]byte{c.EncCert}, EncKey: c.EncKey}
	return s
}

func (s *cardSetup) writePEM(t *testing.T, name string, der []byte) string {
	t.Helper()
	file := filepath.Join(s.dir, name)
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// ref is the sdf: reference of the card's key (sign or enc) at index 1,
// its PIN read from pinFile.
func (s *cardSetup) ref(key, pinFile string) string {
	return fmt.Sprintf("sdf:%s?index=1&key=%s&pin-file=%s", s.lib, key, pinFile)
}

// command is a gmgate command that finds the card's keys.
func (s *cardSetup) command(args ...string) *exec.Cmd {
	cmd := gmgateCommand(args...)
	cmd.Env = append(cmd.Env, "SOFTSDF_KEYDIR="+s.card.Dir)
	return cmd
}

// config writes a configuration of the listener "card" (both keys on the
// card, PIN from pinFile, suites as given when not empty) and, with
// mixed, the listener "mixed" (the card's signing key and a file
// encryption key, ECDHE only), to upstream, and returns its file.
func (s *cardSetup) config(t *testing.T, name, pinFile, suites string, mixed bool, upstream string) string {
	t.Helper()
	cfg := fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - name: card
    listen: "127.0.0.1:0"
    tlcp:
      sign_cert: %s
      sign_key: %q
      enc_cert: %s
      enc_key: %q
%s    routes: [{upstream: app}]
`, s.signCert, s.ref("sign", pinFile), s.encCert, s.ref("enc", pinFile), suites)
	if mixed {
		cfg += fmt.Sprintf(`  - name: mixed
    listen: "127.0.0.1:0"
    tlcp:
      sign_cert: %s
      sign_key: %q
      enc_cert: %s
      enc_key: %q
      suites: [ECDHE_SM4_GCM_SM3]
      client_auth: require_and_verify
      client_ca: %s
    routes: [{upstream: app}]
`, s.signCert, s.ref("sign", pinFile), s.fileEncCert, "file:"+s.fileEncKey+"?password-file="+s.card.PINFile, s.caFile)
	}
	cfg += fmt.Sprintf("upstreams:\n  app: {targets: [%q]}\n", upstream)
	file := filepath.Join(s.dir, name)
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// get makes a request over TLCP offering suite alone and returns the
// suite negotiated and the response body.
func (s *cardSetup) get(addr string, suite uint16) (uint16, string, error) {
	c, err := tlcp.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, &tlcp.Config{
		RootCAs: s.ca.Roots, ServerName: "localhost", Certificates: []tlcp.Certificate{s.client},
		CipherSuites: []uint16{suite}, SessionsDisabled: true,
	})
	if err != nil {
		return 0, "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET /card HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"); err != nil {
		return 0, "", err
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, "", err
	}
	if res.StatusCode != http.StatusOK {
		return 0, "", fmt.Errorf("status %d: %s", res.StatusCode, body)
	}
	return c.ConnectionState().CipherSuite, string(body), nil
}

// cardOps reads the card's private-key operations from /metrics.
func cardOps(t *testing.T, admin, op, result string) float64 {
	t.Helper()
	return adminMetric(t, admin, `gmgate_accel_ops_total{backend="sdf",op="`+op+`",result="`+result+`"}`)
}

// gmgate serves TLCP with both keys of a certificate pair on a crypto
// card: the card signs and decrypts for every handshake, ECDHE is served
// where the encryption key is a file, refused as documented where it is
// on the card, /metrics counts the card's operations, and a reload keeps
// serving with the card.
func TestServeWithCardKeys(t *testing.T) {
	s := newCardSetup(t)
	var upstreamRequests atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/card" {
			upstreamRequests.Add(1)
		}
		fmt.Fprint(w, "served by the upstream")
	}))
	defer up.Close()
	cfgFile := s.config(t, "gmgate.yaml", s.card.PINFile, "", true, up.URL)

	out, err := s.command("config", "check", "-c", cfgFile).CombinedOutput()
	if err != nil {
		t.Fatalf("config check: %v\n%s", err, out)
	}

	srv := startServe(t, s.command("serve", "-c", cfgFile), "card", "mixed")
	srv.waitLog(t, "ECDHE suites disabled: the encryption key cannot do SM2 key agreement")

	signs, decrypts := cardOps(t, srv.admin, "sign", "ok"), cardOps(t, srv.admin, "decrypt", "ok")
	const rounds = 3
	for _, suite := range []uint16{tlcp.ECC_SM4_GCM_SM3, tlcp.ECC_SM4_CBC_SM3} {
		for range rounds {
			got, body, err := s.get(srv.addrs["card"], suite)
			if err != nil || got != suite || body != "served by the upstream" {
				t.Fatalf("card listener, suite %s: %v (suite %s, body %q)", tlcp.CipherSuiteName(suite), err, tlcp.CipherSuiteName(got), body)
			}
		}
	}
	// Each ECC handshake signed the ServerKeyExchange and decrypted the
	// pre-master secret on the card.
	if n := cardOps(t, srv.admin, "decrypt", "ok") - decrypts; n != 2*rounds {
		t.Errorf("card decryptions counted: %v, want %d", n, 2*rounds)
	}
	if n := cardOps(t, srv.admin, "sign", "ok") - signs; n != 2*rounds {
		t.Errorf("card signatures counted: %v, want %d", n, 2*rounds)
	}

	// ECDHE with the card's signing key and a file encryption key.
	signs, decrypts = cardOps(t, srv.admin, "sign", "ok"), cardOps(t, srv.admin, "decrypt", "ok")
	if got, body, err := s.get(srv.addrs["mixed"], tlcp.ECDHE_SM4_GCM_SM3); err != nil || got != tlcp.ECDHE_SM4_GCM_SM3 || body != "served by the upstream" {
		t.Fatalf("mixed listener, ECDHE: %v (suite %s, body %q)", err, tlcp.CipherSuiteName(got), body)
	}
	if n := cardOps(t, srv.admin, "sign", "ok") - signs; n != 1 {
		t.Errorf("card signatures for the ECDHE handshake: %v, want 1", n)
	}
	if n := cardOps(t, srv.admin, "decrypt", "ok") - decrypts; n != 0 {
		t.Errorf("card decryptions for the ECDHE handshake: %v, want 0", n)
	}

	// The card's encryption key cannot do SM2 key agreement: the default
	// suites leave ECDHE out, and a client offering only ECDHE is refused.
	if _, _, err := s.get(srv.addrs["card"], tlcp.ECDHE_SM4_GCM_SM3); err == nil || !strings.Contains(err.Error(), "handshake failure") {
		t.Errorf("ECDHE with the card's encryption key: %v, want a handshake failure alert", err)
	}
	for _, op := range []string{"sign", "decrypt"} {
		if n := cardOps(t, srv.admin, op, "error"); n != 0 {
			t.Errorf("card %s errors counted: %v", op, n)
		}
	}
	if n := upstreamRequests.Load(); n != 2*rounds+1 {
		t.Errorf("the upstream got %d requests, want %d", n, 2*rounds+1)
	}

	// A reload opens the card's keys again and keeps serving with them.
	if err := srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	srv.waitLog(t, `"msg":"configuration reloaded"`)
	if n := strings.Count(srv.logs.String(), "ECDHE suites disabled"); n != 2 {
		t.Errorf("ECDHE suites disabled logged %d times, want at the start and at the reload:\n%s", n, srv.logs)
	}
	decrypts = cardOps(t, srv.admin, "decrypt", "ok")
	if _, _, err := s.get(srv.addrs["card"], tlcp.ECC_SM4_GCM_SM3); err != nil {
		t.Fatalf("after the reload: %v\n%s", err, srv.logs)
	}
	if _, _, err := s.get(srv.addrs["mixed"], tlcp.ECDHE_SM4_GCM_SM3); err != nil {
		t.Fatalf("mixed listener after the reload: %v\n%s", err, srv.logs)
	}
	if n := cardOps(t, srv.admin, "decrypt", "ok") - decrypts; n != 1 {
		t.Errorf("card decryptions after the reload: %v, want 1", n)
	}
	if strings.Contains(srv.logs.String(), s.card.PIN) {
		t.Errorf("the log shows the PIN:\n%s", srv.logs)
	}

	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-srv.exited
	if srv.err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", srv.err, srv.logs)
	}
}

// A PIN the card refuses, and ECDHE asked of a card's encryption key, stop
// config check and serve with the configuration's exit status and a
// message that says what to fix; the PIN is not shown.
func TestCardKeysRefusedConfigurations(t *testing.T) {
	s := newCardSetup(t)
	const wrongPIN = "99887766"
	wrongFile := filepath.Join(s.dir, "wrong.pin")
	if err := os.WriteFile(wrongFile, []byte(wrongPIN+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, cfg string
		want      []string
	}{
		{"wrong PIN", s.config(t, "wrong-pin.yaml", wrongFile, "", false, "http://127.0.0.1:1"), []string{
			"listeners[0].tlcp.sign_key",
			"the device refused the PIN from file " + wrongFile + " for key index 1",
			"No further attempts are made with it",
		}},
		{"ECDHE on the card", s.config(t, "ecdhe.yaml", s.card.PINFile, "      suites: [ECC_SM4_GCM_SM3, ECDHE_SM4_GCM_SM3]\n", false, "http://127.0.0.1:1"), []string{
			"ecdhe.yaml:11: listeners[0].tlcp.suites: the encryption key cannot do SM2 key agreement",
			"sdf:" + s.lib + "?REDACTED",
			"remove the ECDHE suites from this listener or use a file: encryption key",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, args := range [][]string{{"config", "check", "-c", tc.cfg}, {"serve", "-c", tc.cfg}} {
				out, err := s.command(args...).CombinedOutput()
				if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitConfig {
					t.Errorf("%s: exit %v, want %d\n%s", args[0], err, exitConfig, out)
				}
				text := string(out)
				for _, want := range tc.want {
					if !strings.Contains(text, want) {
						t.Errorf("%s: output lacks %q:\n%s", args[0], want, text)
					}
				}
				if strings.Contains(text, wrongPIN) || strings.Contains(text, s.card.PIN) {
					t.Errorf("%s: output shows a PIN:\n%s", args[0], text)
				}
				if strings.Contains(text, `"msg":"listening"`) {
					t.Errorf("%s: started serving:\n%s", args[0], text)
				}
			}
		})
	}
}
