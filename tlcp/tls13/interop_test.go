package tls13

// Interoperability with Tongsuo (github.com/Tongsuo-Project/Tongsuo), an
// independent RFC 8998 implementation, in both directions. The tests run
// only when GMGATE_TONGSUO names a Tongsuo openssl binary, built from its
// public source:
//
//	GMGATE_TONGSUO=/path/to/tongsuo/apps/openssl go test -run TestTongsuo -v ./tlcp/tls13
//
// The certificates are made here (SM2, signed with SM3 under the GM/T 0009
// ID) and written where the openssl commands read them.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmgate/gmgate/internal/testwait"
)

func tongsuo(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("GMGATE_TONGSUO")
	if bin == "" {
		t.Skip("GMGATE_TONGSUO is not set: point it at a Tongsuo openssl binary to run the interop tests")
	}
	return bin
}

// writeIdentities writes the test CA and the server and client
// identities as PEM files into a temporary directory.
func writeIdentities(t *testing.T) string {
	t.Helper()
	p := getPKI(t)
	dir := t.TempDir()
	write := func(name, typ string, der []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("ca.crt", "CERTIFICATE", p.ca.Cert.Raw)
	for name, c := range map[string]Certificate{"server": p.server, "client": p.client} {
		write(name+".crt", "CERTIFICATE", c.Certificate[0])
		der, err := smx509.MarshalPKCS8PrivateKey(c.PrivateKey)
		if err != nil {
			t.Fatal(err)
		}
		write(name+".key", "PRIVATE KEY", der)
	}
	return dir
}

// lockedBuffer collects a process's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// startTongsuoServer runs openssl s_server (answering HTTP GETs with
// -www) and waits until it accepts connections.
func startTongsuoServer(t *testing.T, bin, dir string, args ...string) (addr string, out *lockedBuffer) {
	t.Helper()
	addr = freePort(t)
	out = &lockedBuffer{}
	full := append([]string{"s_server", "-accept", addr, "-www", "-tls1_3",
		"-cert", "server.crt", "-key", "server.key", "-CAfile", "ca.crt"}, args...)
	cmd := exec.Command(bin, full...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	testwait.For(t, "s_server to listen", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return addr, out
}

// getThrough dials addr with our client and asks s_server -www for its
// status page, which names the protocol and suite it used.
func getThrough(t *testing.T, addr string, cfg *Config) (ConnectionState, string, error) {
	t.Helper()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := Client(raw, cfg)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.HandshakeContext(ctx); err != nil {
		return c.ConnectionState(), "", err
	}
	if _, err := io.WriteString(c, "GET / HTTP/1.0\r\n\r\n"); err != nil {
		return c.ConnectionState(), "", err
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	page, err := io.ReadAll(c)
	if err != nil && len(page) == 0 {
		return c.ConnectionState(), "", err
	}
	return c.ConnectionState(), string(page), nil
}

func TestTongsuoServer(t *testing.T) {
	bin := tongsuo(t)
	dir := writeIdentities(t)
	p := getPKI(t)
	for _, tc := range []struct {
		name       string
		suite      string
		group      string
		clientAuth bool
		client     []CurveID
		wantGroup  CurveID
		wantHRR    bool
	}{
		{"GCM curveSM2", "TLS_SM4_GCM_SM3", "curveSM2", false, []CurveID{CurveSM2}, CurveSM2, false},
		{"CCM curveSM2", "TLS_SM4_CCM_SM3", "curveSM2", false, []CurveID{CurveSM2}, CurveSM2, false},
		{"GCM hybrid", "TLS_SM4_GCM_SM3", "curveSM2MLKEM768", false, []CurveID{CurveSM2MLKEM768}, CurveSM2MLKEM768, false},
		{"GCM client auth", "TLS_SM4_GCM_SM3", "curveSM2", true, []CurveID{CurveSM2}, CurveSM2, false},
		{"HRR to hybrid", "TLS_SM4_GCM_SM3", "curveSM2MLKEM768", false, []CurveID{CurveSM2, CurveSM2MLKEM768}, CurveSM2MLKEM768, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"-ciphersuites", tc.suite, "-sigalgs", "sm2sig_sm3", "-groups", tc.group}
			if tc.clientAuth {
				args = append(args, "-Verify", "1")
			}
			addr, out := startTongsuoServer(t, bin, dir, args...)
			cfg := clientConfig(t)
			cfg.CurvePreferences = tc.client
			cfg.ClientSessionCache = NewLRUClientSessionCache(4)
			if tc.clientAuth {
				cfg.Certificates = []Certificate{p.client}
			}
			for round, resumed := range []bool{false, true} {
				st, page, err := getThrough(t, addr, cfg)
				if err != nil {
					t.Fatalf("round %d: %v\ns_server:\n%s", round, err, out)
				}
				want := "New, TLSv1.3, Cipher is " + tc.suite
				if resumed {
					want = "Reused, TLSv1.3, Cipher is " + tc.suite
				}
				if !strings.Contains(page, want) {
					t.Fatalf("round %d: status page does not say %q:\n%s", round, want, page)
				}
				if st.DidResume != resumed || st.Group != tc.wantGroup || (!resumed && st.DidHelloRetryRequest != tc.wantHRR) {
					t.Fatalf("round %d: state %+v", round, st)
				}
			}
		})
	}
}

// runTongsuoClient runs openssl s_client against addr, sends line and
// returns its output.
func runTongsuoClient(t *testing.T, bin, dir, addr, line string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	full := append([]string{"s_client", "-connect", addr, "-tls1_3", "-servername", "server.test",
		"-CAfile", "ca.crt", "-verify_return_error", "-ign_eof"}, args...)
	cmd := exec.CommandContext(ctx, bin, full...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(line)
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// echoServer serves our side: one line echoed in upper case, then close.
func echoServer(t *testing.T, cfg *Config) (string, <-chan ConnectionState) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	states := make(chan ConnectionState, 8)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			c := Server(raw, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			err = c.HandshakeContext(ctx)
			cancel()
			if err != nil {
				states <- ConnectionState{ServerName: "error: " + err.Error()}
				c.Close()
				continue
			}
			c.SetDeadline(time.Now().Add(20 * time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			fmt.Fprintf(c, "ECHO %s", strings.ToUpper(line))
			states <- c.ConnectionState()
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String(), states
}

func TestTongsuoClient(t *testing.T) {
	bin := tongsuo(t)
	dir := writeIdentities(t)
	for _, tc := range []struct {
		name       string
		suite      string
		groups     string
		server     []CurveID
		clientAuth bool
		wantGroup  CurveID
		wantHRR    bool
	}{
		{"GCM curveSM2", "TLS_SM4_GCM_SM3", "curveSM2", nil, false, CurveSM2, false},
		{"CCM curveSM2", "TLS_SM4_CCM_SM3", "curveSM2", nil, false, CurveSM2, false},
		{"GCM hybrid", "TLS_SM4_GCM_SM3", "curveSM2MLKEM768", nil, false, CurveSM2MLKEM768, false},
		{"GCM client auth", "TLS_SM4_GCM_SM3", "curveSM2", nil, true, CurveSM2, false},
		{"HRR to hybrid", "TLS_SM4_GCM_SM3", "curveSM2:curveSM2MLKEM768", []CurveID{CurveSM2MLKEM768}, false, CurveSM2MLKEM768, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := serverConfig(t)
			cfg.CurvePreferences = tc.server
			if tc.clientAuth {
				cfg.ClientAuth = RequireAndVerifyClientCert
			}
			addr, states := echoServer(t, cfg)
			sess := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".sess")
			args := []string{"-ciphersuites", tc.suite, "-sigalgs", "sm2sig_sm3", "-groups", tc.groups}
			if tc.clientAuth {
				args = append(args, "-cert", "client.crt", "-key", "client.key")
			}
			for round, resume := range []bool{false, true} {
				a := append([]string{}, args...)
				if resume {
					a = append(a, "-sess_in", sess)
				} else {
					a = append(a, "-sess_out", sess)
				}
				out := runTongsuoClient(t, bin, dir, addr, "hello gmgate\n", a...)
				st := <-states
				if !st.HandshakeComplete {
					t.Fatalf("round %d: server: %s\ns_client:\n%s", round, st.ServerName, out)
				}
				want := "New, TLSv1.3, Cipher is " + tc.suite
				if resume {
					want = "Reused, TLSv1.3, Cipher is " + tc.suite
				}
				if !strings.Contains(out, "ECHO HELLO GMGATE") || !strings.Contains(out, want) {
					t.Fatalf("round %d: s_client output:\n%s", round, out)
				}
				if st.Group != tc.wantGroup || st.DidResume != resume || (!resume && st.DidHelloRetryRequest != tc.wantHRR) {
					t.Fatalf("round %d: server state %+v\n%s", round, st, out)
				}
				if tc.clientAuth && len(st.VerifiedChains) == 0 {
					t.Fatalf("round %d: client certificate not verified", round)
				}
			}
		})
	}
}

// TestTongsuoSignatureID shows which SM2 ID Tongsuo signs and checks
// CertificateVerify with: a server of ours that signs with the GM/T 0009
// ID "1234567812345678" instead of RFC 8998's is refused.
func TestTongsuoSignatureID(t *testing.T) {
	bin := tongsuo(t)
	dir := writeIdentities(t)
	cfg := serverConfig(t)
	cfg.SignatureID = "1234567812345678"
	addr, states := echoServer(t, cfg)
	out := runTongsuoClient(t, bin, dir, addr, "hello\n", "-ciphersuites", "TLS_SM4_GCM_SM3", "-sigalgs", "sm2sig_sm3", "-groups", "curveSM2")
	st := <-states
	if st.HandshakeComplete || strings.Contains(out, "ECHO") {
		t.Fatalf("Tongsuo accepted a CertificateVerify made with the GM/T 0009 ID:\n%s", out)
	}
	// Tongsuo answers a signature that does not verify with
	// decrypt_error (RFC 8446 §4.4.3).
	if want := "remote error: " + AlertDecryptError.String(); !strings.Contains(st.ServerName, want) {
		t.Fatalf("server: %s, want %q\ns_client:\n%s", st.ServerName, want, out)
	}
}
