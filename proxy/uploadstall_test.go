package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/testnet"
	"github.com/gmgate/gmgate/tlcp"
)

// TestUploadToStalledUpstreamEnds: an upstream that takes a request's
// header and then stops reading its body (a hung process, its socket
// open) is given up after timeouts.idle: timeouts.upstream_response only
// counts once the request is written, and the client's body is not idle
// (gmgate is the one not reading), so nothing else ends the request.
func TestUploadToStalledUpstreamEnds(t *testing.T) {
	p := getPKI(t)
	cert, err := certs.LoadTLCP(p.dual.SignCert, p.dual.SignKey, p.dual.EncCert, p.dual.EncKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, scheme := range []string{"http", "tlcp"} {
		t.Run(scheme, func(t *testing.T) {
			release := make(chan struct{})
			defer close(release)
			up := testnet.Serve(t, func(c net.Conn) {
				if scheme == "tlcp" {
					c = tlcp.Server(c, &tlcp.Config{Certificates: []tlcp.Certificate{*cert}})
				}
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				<-release // reads nothing more
			})
			cfg := testConfig(p, scheme+"://"+up)
			cfg.Timeouts.Idle = config.Duration(300 * time.Millisecond)
			cfg.Upstreams["app"].Health.Disabled = true
			if scheme == "tlcp" {
				cfg.Upstreams["app"].TLCP = &config.UpstreamTLCP{CA: p.dual.CACert, ServerName: "localhost"}
				config.Defaults(cfg)
			}
			s := startServer(t, cfg, nil)

			pr, pw := io.Pipe()
			defer pw.Close()
			go func() {
				buf := make([]byte, 64<<10)
				for {
					if _, err := pw.Write(buf); err != nil {
						return
					}
				}
			}()
			client := tlcpClient(t, p, nil)
			client.Timeout = 15 * time.Second
			start := time.Now()
			resp, err := client.Post(gatewayURL(s, "/upload"), "application/octet-stream", pr)
			d := time.Since(start)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusGatewayTimeout {
					t.Errorf("upload to an upstream that stopped reading: %d, want 504", resp.StatusCode)
				}
			}
			if d > 10*time.Second {
				t.Fatalf("upload to an upstream that stopped reading still going after %v (idle 300ms): %v", d, err)
			}
		})
	}
}
