package proxy

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/tlcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// grpcClients connects a gRPC client to the gateway's listener over TLS
// and over TLCP (HTTP/2 chosen by ALPN on both).
func grpcClients(t *testing.T, p *testPKI, addr string) map[string]*grpc.ClientConn {
	t.Helper()
	overTLS, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: p.tlsRoots, ServerName: "localhost"})))
	if err != nil {
		t.Fatal(err)
	}
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		d := &tlcp.Dialer{Config: &tlcp.Config{RootCAs: p.roots, ServerName: "localhost", NextProtos: []string{"h2"}}}
		return d.DialContext(ctx, "tcp", addr)
	}
	overTLCP, err := grpc.NewClient("passthrough:///"+addr, grpc.WithContextDialer(dial), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { overTLS.Close(); overTLCP.Close() })
	return map[string]*grpc.ClientConn{"tls": overTLS, "tlcp": overTLCP}
}

// TestGRPCUpstreamFailure: a gRPC call whose upstream is down, or does
// not answer in time, is answered as a gRPC proxy answers it, with a
// gRPC status the client reads as such (UNAVAILABLE, DEADLINE_EXCEEDED)
// and gmgate's reason, not "unexpected HTTP status code".
func TestGRPCUpstreamFailure(t *testing.T) {
	p := getPKI(t)
	for _, tc := range []struct {
		name, target string
		code         codes.Code
		msg          string
	}{
		{"down", "h2c://" + closedAddr(t), codes.Unavailable, "upstream server"},
		{"no answer", "h2c://" + silentServer(t), codes.DeadlineExceeded, "the upstream server did not answer in time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(p, tc.target)
			cfg.Timeouts.UpstreamResponse = config.Duration(300 * time.Millisecond)
			cfg.Upstreams["app"].Health.Disabled = true
			s, logs := startLogged(t, cfg, nil)
			for name, cc := range grpcClients(t, p, s.Addr("edge").String()) {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: "orders"})
				cancel()
				st := status.Convert(err)
				if st.Code() != tc.code || !strings.Contains(st.Message(), tc.msg) || strings.Contains(st.Message(), "HTTP status") {
					t.Errorf("%s: %v; want %s with %q", name, err, tc.code, tc.msg)
				}
			}
			if line := logLine(logs, "upstream failed", nil); line == nil || line["grpc_status"] != float64(tc.code) {
				t.Errorf("the failure line does not carry grpc_status %d: %v", tc.code, line)
			}
		})
	}
}
