package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/internal/testnet"
	"github.com/gmgate/gmgate/tlcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server is a TLCP HTTP server that requests (and verifies, when given)
// client certificates and answers with what it saw.
func server(t *testing.T) (url string, dir string, client pki.DualFiles) {
	t.Helper()
	dir = t.TempDir()
	ca, err := pki.NewCA(pki.CAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Write(dir, nil); err != nil {
		t.Fatal(err)
	}
	srvPair, err := ca.IssueDual(pki.IssueOptions{DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	cliPair, err := ca.IssueDual(pki.IssueOptions{DNSNames: []string{"client.test"}})
	if err != nil {
		t.Fatal(err)
	}
	if client, err = cliPair.Write(filepath.Join(dir), "client", nil); err != nil {
		t.Fatal(err)
	}
	cfg := &tlcp.Config{
		Certificates: []tlcp.Certificate{*srvPair.Certificate()},
		ClientAuth:   tlcp.VerifyClientCertIfGiven,
		ClientCAs:    ca.Pool(),
	}
	ln, err := tlcp.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Host == "site.example.cn" {
				w.Write([]byte("site: "))
			}
			conn := r.Context().Value(connKey{}).(*tlcp.Conn)
			fmt.Fprintf(w, "method=%s header=%s host=%s ua=%s client-certs=%d", r.Method, r.Header.Get("X-Test"), r.Host, r.UserAgent(), len(conn.ConnectionState().PeerCertificates))
		}),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "https://" + ln.Addr().String() + "/path", dir, client
}

type connKey struct{}

func TestProbe(t *testing.T) {
	url, dir, client := server(t)
	ca := filepath.Join(dir, pki.CACertFile)
	ctx := context.Background()

	var info bytes.Buffer
	res, err := Run(ctx, Options{URL: url, CAFile: ca, Resume: true, Method: "POST", Body: "x", Header: http.Header{"X-Test": {"yes"}}}, &info)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != 200 || !strings.HasPrefix(string(res.Body), "method=POST header=yes host=127.0.0.1:") {
		t.Errorf("got %d %q", res.Status, res.Body)
	}
	if !res.Resumed() || len(res.Resumptions) != 1 || res.Resumptions[0].Addr != res.Addr {
		t.Errorf("second connection did not resume: %+v", res.Resumptions)
	}
	// The suite both sides prefer on this CPU (GCM first where it is
	// constant-time, CBC first elsewhere).
	suite := tlcp.CipherSuiteName(tlcp.DefaultCipherSuites[0])
	for _, want := range []string{"TLCP handshake done", suite, "certificate 0 (sign)", "certificate 1 (enc)", "verified up to", "< HTTP/1.1 200 OK", "resumed the session: yes"} {
		if !strings.Contains(info.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, info.String())
		}
	}

	// The suite can be chosen.
	res, err = Run(ctx, Options{URL: url, CAFile: ca, Suites: []string{"ECC-SM2-SM4-CBC-SM3"}}, nil)
	if err != nil || res.State.CipherSuite != tlcp.ECC_SM4_CBC_SM3 {
		t.Errorf("suite choice: %v %v", err, res)
	}
	// A client certificate is sent.
	if _, err := Run(ctx, Options{URL: url, CAFile: ca, SignCert: client.SignCert, SignKey: client.SignKey, EncCert: client.EncCert, EncKey: client.EncKey}, nil); err != nil {
		t.Errorf("with a client certificate: %v", err)
	}
}

func TestProbeRefusals(t *testing.T) {
	url, _, _ := server(t)
	ctx := context.Background()
	// The system pool does not know the local CA.
	if _, err := Run(ctx, Options{URL: url}, nil); err == nil {
		t.Error("an unknown CA was accepted")
	}
	if res, err := Run(ctx, Options{URL: url, Insecure: true}, nil); err != nil || res.Status != 200 {
		t.Errorf("insecure: %v", err)
	}
	for _, bad := range []Options{{URL: "http://127.0.0.1:1/"}, {URL: "https://"}, {URL: url, Insecure: true, Suites: []string{"RC4"}}} {
		if _, err := Run(ctx, bad, nil); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// -H "Host: ..." sets the request's Host, and headers the user gives are
// sent as given, User-Agent included.
func TestProbeHostAndHeaders(t *testing.T) {
	url, dir, _ := server(t)
	ca := filepath.Join(dir, pki.CACertFile)
	var info bytes.Buffer
	res, err := Run(context.Background(), Options{URL: url, CAFile: ca, Header: http.Header{"Host": {"site.example.cn"}, "User-Agent": {"my-agent/1"}, "X-Test": {"kept"}}}, &info)
	if err != nil {
		t.Fatal(err)
	}
	if want := "site: method=GET header=kept host=site.example.cn ua=my-agent/1"; !strings.HasPrefix(string(res.Body), want) {
		t.Errorf("body %q, want it to start with %q", res.Body, want)
	}
	if !strings.Contains(info.String(), "> Host: site.example.cn\n") || strings.Contains(info.String(), "gmgate-probe") {
		t.Errorf("request as shown:\n%s", info.String())
	}
	// Without a User-Agent of the user's, the probe names itself.
	res, err = Run(context.Background(), Options{URL: url, CAFile: ca}, nil)
	if err != nil || !strings.Contains(string(res.Body), "ua=gmgate-probe") {
		t.Errorf("default user agent: %v %q", err, res.Body)
	}
}

// --resolve connects elsewhere while the URL's host is verified and sent.
func TestProbeResolve(t *testing.T) {
	url, dir, _ := server(t)
	ca := filepath.Join(dir, pki.CACertFile)
	_, port, _ := net.SplitHostPort(strings.TrimSuffix(strings.TrimPrefix(url, "https://"), "/path"))
	var info bytes.Buffer
	res, err := Run(context.Background(), Options{URL: "https://localhost:" + port + "/path", CAFile: ca, Resolve: []string{"localhost:" + port + ":127.0.0.1"}}, &info)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Body), "host=localhost:"+port) || res.Addr != "127.0.0.1:"+port {
		t.Errorf("addr %s, body %q", res.Addr, res.Body)
	}
	if !strings.Contains(info.String(), "--resolve: localhost:"+port+" goes to 127.0.0.1:"+port) {
		t.Errorf("info:\n%s", info.String())
	}
	// The certificate names localhost and 127.0.0.1, not this name.
	if _, err := Run(context.Background(), Options{URL: "https://other.example.cn:" + port + "/", CAFile: ca, Resolve: []string{"other.example.cn:" + port + ":127.0.0.1"}}, nil); err == nil {
		t.Error("a name the certificate does not carry was accepted")
	}
	for _, bad := range []string{"localhost:" + port, "localhost:" + port + ":not-an-ip", ":" + port + ":127.0.0.1"} {
		if _, err := Run(context.Background(), Options{URL: url, CAFile: ca, Resolve: []string{bad}}, nil); err == nil || !strings.Contains(err.Error(), "--resolve") {
			t.Errorf("--resolve %q: %v", bad, err)
		}
	}
}

// A client identity of the signing certificate alone; errors name the
// command's flags.
func TestProbeClientCertificates(t *testing.T) {
	url, dir, client := server(t)
	ca := filepath.Join(dir, pki.CACertFile)
	res, err := Run(context.Background(), Options{URL: url, CAFile: ca, SignCert: client.SignCert, SignKey: client.SignKey}, nil)
	if err != nil {
		t.Fatalf("signing certificate alone: %v", err)
	}
	if !strings.Contains(string(res.Body), "client-certs=1") {
		t.Errorf("the server saw %q", res.Body)
	}
	res, err = Run(context.Background(), Options{URL: url, CAFile: ca, SignCert: client.SignCert, SignKey: client.SignKey, EncCert: client.EncCert, EncKey: client.EncKey, Suites: []string{"ECDHE_SM4_GCM_SM3"}}, nil)
	if err != nil || !strings.Contains(string(res.Body), "client-certs=2") {
		t.Errorf("dual certificate with ECDHE: %v %q", err, res.Body)
	}
	_, err = Run(context.Background(), Options{URL: url, CAFile: ca, SignCert: client.SignCert, SignKey: client.SignKey, EncCert: client.EncCert}, nil)
	if err == nil || !strings.Contains(err.Error(), "--enc-key is not set") {
		t.Errorf("half an encryption pair: %v", err)
	}
	_, err = Run(context.Background(), Options{URL: url, CAFile: ca, SignCert: client.SignCert, SignKey: client.EncKey}, nil)
	if err == nil || !strings.Contains(err.Error(), "--key "+client.EncKey+" does not belong to --cert "+client.SignCert) || strings.Contains(err.Error(), "sign_") {
		t.Errorf("wrong key: %v", err)
	}
}

// --profile gmssl sends the signing certificate alone with the ECC suites
// (and both with ECDHE, which needs the encryption certificate); the
// standard profile sends both; an unknown profile is refused.
func TestProbeProfile(t *testing.T) {
	url, dir, client := server(t)
	ca := filepath.Join(dir, pki.CACertFile)
	for _, tc := range []struct {
		profile, suite string
		certs          int
	}{
		{"", "ECC_SM4_GCM_SM3", 2},
		{"standard", "ECC_SM4_CBC_SM3", 2},
		{"gmssl", "ECC_SM4_GCM_SM3", 1},
		{"gmssl", "ECDHE_SM4_CBC_SM3", 2},
	} {
		res, err := Run(context.Background(), Options{URL: url, CAFile: ca, Profile: tc.profile, Suites: []string{tc.suite},
			SignCert: client.SignCert, SignKey: client.SignKey, EncCert: client.EncCert, EncKey: client.EncKey}, nil)
		if err != nil {
			t.Fatalf("profile %q, %s: %v", tc.profile, tc.suite, err)
		}
		if want := fmt.Sprintf("client-certs=%d", tc.certs); !strings.Contains(string(res.Body), want) {
			t.Errorf("profile %q, %s: the server saw %q, want %s", tc.profile, tc.suite, res.Body, want)
		}
	}
	_, err := Run(context.Background(), Options{URL: url, CAFile: ca, Profile: "tongsuo"}, nil)
	if err == nil || !strings.Contains(err.Error(), "--profile") || !strings.Contains(err.Error(), "gmssl") {
		t.Errorf("unknown profile: %v", err)
	}
}

// --resume sends the request on the second connection too.
func TestProbeResumeShowsBothResponses(t *testing.T) {
	url, dir, _ := server(t)
	var info bytes.Buffer
	res, err := Run(context.Background(), Options{URL: url, CAFile: filepath.Join(dir, pki.CACertFile), Resume: true, Header: http.Header{"X-Test": {"again"}}}, &info)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Resumptions) != 1 {
		t.Fatalf("%d resumption checks", len(res.Resumptions))
	}
	if r := res.Resumptions[0]; !r.Resumed || r.Status != 200 || !strings.HasPrefix(string(r.Body), "method=GET header=again") {
		t.Errorf("second response %d %q (resumed %v)", r.Status, r.Body, r.Resumed)
	}
	if n := strings.Count(info.String(), "< HTTP/1.1 200 OK"); n != 2 {
		t.Errorf("%d responses shown:\n%s", n, info.String())
	}
}

// Raw mode: bytes out, the sending side closed, everything back.
func TestProbeRaw(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA(pki.CAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca.Write(dir, nil)
	pair, err := ca.IssueDual(pki.IssueOptions{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tlcp.Listen("tcp", "127.0.0.1:0", &tlcp.Config{Certificates: []tlcp.Certificate{*pair.Certificate()}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			in, _ := io.ReadAll(c)
			fmt.Fprintf(c, "got %q", in)
			c.Close()
		}
	}()
	defer func() { ln.Close(); <-done }()
	caFile := filepath.Join(dir, pki.CACertFile)
	var info bytes.Buffer
	res, err := Run(context.Background(), Options{URL: ln.Addr().String(), CAFile: caFile, Raw: true, Send: []byte("PING\r\n")}, &info)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Body) != `got "PING\r\n"` || !strings.Contains(info.String(), "6 bytes sent") {
		t.Errorf("body %q\n%s", res.Body, info.String())
	}
	res, err = Run(context.Background(), Options{URL: "tlcp://" + ln.Addr().String(), CAFile: caFile, Raw: true, Stdin: strings.NewReader("from stdin"), Resume: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Body) != `got "from stdin"` || len(res.Resumptions) != 1 || string(res.Resumptions[0].Body) != `got "from stdin"` || !res.Resumed() {
		t.Errorf("stdin: %q, second %+v", res.Body, res.Resumptions)
	}
	if _, err := Run(context.Background(), Options{URL: ln.Addr().String(), CAFile: caFile}, nil); err == nil || !strings.Contains(err.Error(), "--send") {
		t.Errorf("host:port without raw mode: %v", err)
	}
}

// A server that closes without an alert is described, not reported as EOF.
func TestProbeCloseWithoutAlert(t *testing.T) {
	for name, serve := range map[string]func(net.Conn){
		"closes at once":     func(net.Conn) {},
		"closes after hello": func(c net.Conn) { c.Read(make([]byte, 1024)) },
	} {
		t.Run(name, func(t *testing.T) {
			addr := testnet.Serve(t, serve)
			_, err := Run(context.Background(), Options{URL: "https://" + addr + "/", Insecure: true}, nil)
			if err == nil || !strings.Contains(err.Error(), "closed the connection during the TLCP handshake without sending an alert: it may not speak TLCP") {
				t.Errorf("got %v", err)
			}
			var ae *tlcp.AlertError
			if errors.As(err, &ae) {
				t.Errorf("described as an alert: %v", err)
			}
		})
	}
}

// alpnServer is a TLCP server that offers protos by ALPN ("refuse": it
// ends a hello with extensions with an alert) and serves HTTP/1.1 and
// HTTP/2, answering with the version it was asked in.
func alpnServer(t *testing.T, protos ...string) (url, caFile string) {
	t.Helper()
	caFile, cert := localPair(t)
	cfg := &tlcp.Config{Certificates: []tlcp.Certificate{cert}, NextProtos: protos}
	if len(protos) == 1 && protos[0] == "refuse" {
		cfg.NextProtos = nil
		cfg.GetConfigForClient = func(hi *tlcp.ClientHelloInfo) (*tlcp.Config, error) {
			if len(hi.SupportedProtos) > 0 {
				return nil, &tlcp.AlertError{Alert: tlcp.AlertUnsupportedExtension, Err: errors.New("extensions refused")}
			}
			return nil, nil
		}
	}
	ln, err := tlcp.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", r.Proto, r.URL.Path)
	})}
	srv.Protocols = &http.Protocols{}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "https://" + ln.Addr().String() + "/p", caFile
}

// localPair writes a new CA to a temporary directory and returns its file
// and a certificate pair it issued for 127.0.0.1.
func localPair(t *testing.T) (caFile string, cert tlcp.Certificate) {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.NewCA(pki.CAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Write(dir, nil); err != nil {
		t.Fatal(err)
	}
	pair, err := ca.IssueDual(pki.IssueOptions{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, pki.CACertFile), *pair.Certificate()
}

// --http2 offers ALPN and speaks the version the server chooses; without
// it no ALPN is offered and HTTP/1.1 is spoken.
func TestProbeHTTP2(t *testing.T) {
	ctx := context.Background()
	url, ca := alpnServer(t, "h2", "http/1.1")
	for _, tc := range []struct {
		http2       bool
		proto, alpn string
	}{{true, "HTTP/2.0", "* ALPN: h2"}, {false, "HTTP/1.1", ""}} {
		var info bytes.Buffer
		res, err := Run(ctx, Options{URL: url, CAFile: ca, HTTP2: tc.http2, Resume: true}, &info)
		if err != nil {
			t.Fatal(err)
		}
		if res.Proto != tc.proto || string(res.Body) != tc.proto+" /p" || len(res.Resumptions) != 1 || string(res.Resumptions[0].Body) != tc.proto+" /p" || !res.Resumed() {
			t.Errorf("http2 %v: %s %q %+v", tc.http2, res.Proto, res.Body, res.Resumptions)
		}
		if tc.alpn != "" && !strings.Contains(info.String(), tc.alpn) || tc.alpn == "" && strings.Contains(info.String(), "ALPN") {
			t.Errorf("http2 %v: output:\n%s", tc.http2, info.String())
		}
		if want := "> GET /p " + strings.TrimSuffix(tc.proto, ".0"); !strings.Contains(info.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, info.String())
		}
	}
	// A server that does not choose h2 is spoken to in HTTP/1.1.
	for _, protos := range [][]string{{"http/1.1"}, nil} {
		url, ca := alpnServer(t, protos...)
		if res, err := Run(ctx, Options{URL: url, CAFile: ca, HTTP2: true}, nil); err != nil || res.Proto != "HTTP/1.1" {
			t.Errorf("server offering %q: %v %v", protos, res, err)
		}
	}
	// A server that refuses ALPN: the error says --http2 may be why.
	url, ca = alpnServer(t, "refuse")
	if _, err := Run(ctx, Options{URL: url, CAFile: ca, HTTP2: true}, nil); err == nil || !strings.Contains(err.Error(), "--http2 offered ALPN") {
		t.Errorf("refused: %v", err)
	}
	if res, err := Run(ctx, Options{URL: url, CAFile: ca}, nil); err != nil || res.Proto != "HTTP/1.1" {
		t.Errorf("the refusing server without --http2: %v", err)
	}
}

// TestProbeResumeAt checks resumption at other addresses: a server that
// shares the first one's session cache resumes, one with its own cache
// makes a full handshake, and every check offers the first connection's
// session even after a check made a new one.
func TestProbeResumeAt(t *testing.T) {
	caFile, cert := localPair(t)
	start := func(cache tlcp.SessionCache, name string) string {
		ln, err := tlcp.Listen("tcp", "127.0.0.1:0", &tlcp.Config{Certificates: []tlcp.Certificate{cert}, SessionCache: cache})
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name) })}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		return ln.Addr().String()
	}
	shared := tlcp.NewLRUSessionCache(16, 0)
	first := start(shared, "first;")
	replica := start(shared, "replica;")
	other := start(tlcp.NewLRUSessionCache(16, 0), "other;")

	var info bytes.Buffer
	res, err := Run(context.Background(), Options{URL: "https://" + first + "/", CAFile: caFile, ResumeAt: []string{other, replica}}, &info)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Resumptions) != 2 {
		t.Fatalf("%d resumption checks: %+v", len(res.Resumptions), res.Resumptions)
	}
	o, r := res.Resumptions[0], res.Resumptions[1]
	if o.Addr != other || o.Resumed || string(o.Body) != "other;" {
		t.Errorf("the server with its own cache: %+v", o)
	}
	if r.Addr != replica || !r.Resumed || string(r.Body) != "replica;" || r.Suite != tlcp.CipherSuiteName(tlcp.DefaultCipherSuites[0]) {
		t.Errorf("the server sharing the first one's cache: %+v", r)
	}
	if res.Resumed() {
		t.Error("Resumed() with a check that made a full handshake")
	}
	for _, want := range []string{
		"* connection to " + other + " resumed the session: no (full handshake)",
		"* connection to " + replica + " resumed the session: yes",
	} {
		if !strings.Contains(info.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, info.String())
		}
	}

}

func TestResumeAddrs(t *testing.T) {
	for _, tc := range []struct {
		at      []string
		urlPort string
		resume  bool
		want    string
	}{
		{nil, "8443", false, ""},
		{nil, "8443", true, "10.0.0.1:8443"},
		{[]string{"10.0.0.2:9443", "10.0.0.3"}, "8443", false, "10.0.0.2:9443 10.0.0.3:8443"},
		{[]string{"replica-2"}, "", true, "replica-2:443"},
		{[]string{"::1", "[::2]", "[::3]:8443"}, "443", false, "[::1]:443 [::2]:443 [::3]:8443"},
		{[]string{"10.0.0.2:"}, "443", false, "error"},
		{[]string{"a:b:c"}, "443", false, "error"},
		{[]string{"0["}, "443", false, "error"},
		{[]string{"replica 2"}, "443", false, "error"},
		{[]string{"10.0.0.2:https"}, "443", false, "error"},
		{[]string{"10.0.0.2:70000"}, "443", false, "error"},
		{[]string{"gw.example.cn."}, "443", false, "gw.example.cn.:443"},
		{[]string{""}, "443", false, "error"},
	} {
		addrs, err := resumeAddrs("10.0.0.1:8443", tc.urlPort, Options{Resume: tc.resume, ResumeAt: tc.at})
		got := strings.Join(addrs, " ")
		if err != nil {
			got = "error"
			if !strings.Contains(err.Error(), "--resume-at") {
				t.Errorf("%q: the error does not name the flag: %v", tc.at, err)
			}
		}
		if got != tc.want {
			t.Errorf("%q (URL port %q): got %q, want %q", tc.at, tc.urlPort, got, tc.want)
		}
	}
}

// FuzzResumeAddrs: any --resume-at value is an error or an address that
// splits into a host and a port again.
func FuzzResumeAddrs(f *testing.F) {
	for _, seed := range []string{"10.0.0.2:9443", "10.0.0.3", "replica-2", "::1", "[::2]", "[::3]:8443", "10.0.0.2:", "a:b:c", "", "[", "]:1", "[[::1]]"} {
		f.Add(seed, "8443")
	}
	f.Fuzz(func(t *testing.T, at, urlPort string) {
		addrs, err := resumeAddrs("10.0.0.1:8443", urlPort, Options{ResumeAt: []string{at}})
		if err != nil {
			return
		}
		if len(addrs) != 1 {
			t.Fatalf("%q: %d addresses", at, len(addrs))
		}
		host, port, err := net.SplitHostPort(addrs[0])
		if err != nil || host == "" || port == "" {
			t.Fatalf("%q gave %q, which does not split into host and port: %v", at, addrs[0], err)
		}
		if !validHost(host) {
			t.Fatalf("%q gave %q, whose host is neither a name nor an address", at, addrs[0])
		}
	})
}

// A --ca bundle with a damaged block (a CA pasted without its last lines)
// is refused with the block and its line, not used without that CA; so
// is a file without a certificate.
func TestProbeCADamaged(t *testing.T) {
	url, dir, _ := server(t)
	good, err := os.ReadFile(filepath.Join(dir, pki.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	damaged := filepath.Join(dir, "bundle.pem")
	if err := os.WriteFile(damaged, append(bytes.Clone(good), good[:len(good)/2]...), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	line := bytes.Count(good, []byte("\n")) + 1
	for file, want := range map[string]string{
		damaged: fmt.Sprintf("--ca: %s: PEM block 2 (line %d) is damaged", damaged, line),
		empty:   "--ca: " + empty + ": ",
	} {
		if _, err := Run(context.Background(), Options{URL: url, CAFile: file}, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--ca %s: %v; want an error with %q", filepath.Base(file), err, want)
		}
	}
}

// A server that stops answering is reported with the step that waited
// and the bound that ended it, not as a bare context error.
func TestProbeTimeoutNamesTheStep(t *testing.T) {
	caFile, cert := localPair(t)
	silent := testnet.Serve(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	ended := make(chan struct{})
	mute := testnet.Serve(t, func(c net.Conn) {
		tc := tlcp.Server(c, &tlcp.Config{Certificates: []tlcp.Certificate{cert}})
		_, _ = io.Copy(io.Discard, tc)
		// The client has sent all: keep its connection, without a word.
		<-ended
	})
	t.Cleanup(func() { close(ended) })
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"handshake", Options{URL: "https://" + silent + "/", Insecure: true}, "the TLCP handshake with " + silent + " did not finish within --timeout 300ms"},
		{"response", Options{URL: "https://" + mute + "/", CAFile: caFile}, "no response from " + mute + " within --timeout 300ms"},
		{"raw answer", Options{URL: mute, CAFile: caFile, Raw: true, Send: []byte("x")}, "the answer from " + mute + " did not end within --timeout 300ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Timeout = 300 * time.Millisecond
			_, err := Run(context.Background(), tc.o, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// Names in a server's certificate and its status line are the server's
// words: control characters in them reach the terminal escaped, not as
// commands.
func TestProbeEscapesServerText(t *testing.T) {
	c := &smx509.Certificate{
		DNSNames:     []string{"ok.example.cn", "evil\x1b]0;owned\x07.example.cn"},
		SerialNumber: big.NewInt(1),
	}
	var out bytes.Buffer
	writeState(&out, tlcp.ConnectionState{PeerCertificates: []*smx509.Certificate{c}}, 0, false)
	if strings.ContainsAny(out.String(), "\x1b\x07") {
		t.Fatalf("control characters printed as they are:\n%q", out.String())
	}
	if !strings.Contains(out.String(), `names ok.example.cn "evil\x1b]0;owned\a.example.cn"`) {
		t.Fatalf("names not shown:\n%s", out.String())
	}

	caFile, cert := localPair(t)
	addr := testnet.Serve(t, func(c net.Conn) {
		tc := tlcp.Server(c, &tlcp.Config{Certificates: []tlcp.Certificate{cert}})
		defer tc.Close()
		_, _ = tc.Read(make([]byte, 4096))
		_, _ = io.WriteString(tc, "HTTP/1.1 200 OK\x1b[2J\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	})
	out.Reset()
	if _, err := Run(context.Background(), Options{URL: "https://" + addr + "/", CAFile: caFile}, &out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "\x1b") || !strings.Contains(out.String(), `< HTTP/1.1 "200 OK\x1b[2J"`) {
		t.Fatalf("status line:\n%q", out.String())
	}
}
