package probe

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/internal/testgmssl"
	"github.com/gmgate/gmgate/tlcp"
)

// gmsslServer is a TLCP server that requires a client certificate and
// refuses the standard profile's answer as a GmSSL 3 server does; it
// counts the connections it took.
func gmsslServer(t *testing.T) (url, dir string, client pki.DualFiles, conns *atomic.Int64) {
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
	if client, err = cliPair.Write(dir, "client", nil); err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns = &atomic.Int64{}
	cfg := &tlcp.Config{Certificates: []tlcp.Certificate{*srvPair.Certificate()}, ClientAuth: tlcp.RequireAndVerifyClientCert, ClientCAs: ca.Pool()}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("gmssl-peer")) }),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		},
	}
	go srv.Serve(tlcp.NewListener(testgmssl.Listener(inner), cfg))
	t.Cleanup(func() { srv.Close() })
	return "https://" + inner.Addr().String() + "/", dir, client, conns
}

// --profile auto reaches a GmSSL-style server: the standard profile is
// refused, gmssl taken (and said), and the resumption check's
// connection uses gmssl at once; --profile standard fails there with a
// hint that names --profile gmssl.
func TestProbeProfileAuto(t *testing.T) {
	url, dir, client, conns := gmsslServer(t)
	o := Options{URL: url, CAFile: filepath.Join(dir, pki.CACertFile), Profile: "auto", Resume: true,
		SignCert: client.SignCert, SignKey: client.SignKey, EncCert: client.EncCert, EncKey: client.EncKey}
	var info bytes.Buffer
	res, err := Run(context.Background(), o, &info)
	if err != nil {
		t.Fatalf("%v\n%s", err, info.String())
	}
	if string(res.Body) != "gmssl-peer" {
		t.Fatalf("body %q", res.Body)
	}
	for _, want := range []string{"* profile standard refused", "trying gmssl", "* client profile: gmssl (--profile auto)"} {
		if !strings.Contains(info.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, info.String())
		}
	}
	// The refused connection, the first and the resumption check's.
	if n := conns.Load(); n != 3 {
		t.Errorf("the server took %d connections, want 3", n)
	}
	o.Profile = "standard"
	if _, err := Run(context.Background(), o, nil); err == nil || !strings.Contains(err.Error(), "a GmSSL 3 server needs --profile gmssl") {
		t.Errorf("standard profile: %v", err)
	}
}
