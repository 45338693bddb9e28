package probe

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/tlcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server is a TLCP HTTP server that requests (and verifies, when given)
// client certificates and answers with what it saw.
func server(t *testing.T) (url string, dir string, client certs.DualFiles) {
	t.Helper()
	dir = t.TempDir()
	ca, err := certs.NewCA(certs.CAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Write(dir, nil); err != nil {
		t.Fatal(err)
	}
	srvPair, err := ca.IssueDual(certs.IssueOptions{DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	cliPair, err := ca.IssueDual(certs.IssueOptions{DNSNames: []string{"client.test"}})
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
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("method=" + r.Method + " header=" + r.Header.Get("X-Test")))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "https://" + ln.Addr().String() + "/path", dir, client
}

func TestProbe(t *testing.T) {
	url, dir, client := server(t)
	ca := filepath.Join(dir, certs.CACertFile)
	ctx := context.Background()

	var info bytes.Buffer
	res, err := Run(ctx, Options{URL: url, CAFile: ca, Resume: true, Method: "POST", Body: "x", Header: http.Header{"X-Test": {"yes"}}}, &info)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != 200 || string(res.Body) != "method=POST header=yes" {
		t.Errorf("got %d %q", res.Status, res.Body)
	}
	if !res.ResumeTested || !res.Resumed {
		t.Error("second connection did not resume")
	}
	for _, want := range []string{"TLCP handshake done", "ECC_SM4_GCM_SM3", "certificate 0 (sign)", "certificate 1 (enc)", "verified up to", "< HTTP/1.1 200 OK", "resumed the session: yes"} {
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
