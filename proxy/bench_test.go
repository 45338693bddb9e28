package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// BenchmarkKeepAlive sends keep-alive HTTP requests to a small upstream,
// straight and through the gateway (TLCP and TLS 1.3 on the client side,
// HTTP/1.1 and HTTP/2, where the clients share one connection), and
// reports requests per second and the latency percentiles; the gateway's
// added latency is the difference between the runs.
//
//	go test -run '^$' -bench KeepAlive -benchtime 5000x ./proxy/
func BenchmarkKeepAlive(b *testing.B) {
	p := getPKI(b)
	body := []byte("hello from the upstream\n")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(body)
	}))
	defer up.Close()
	cfg := testConfig(p, up.URL)
	s := startServer(b, cfg, nil)

	tlcpH2, _ := h2TLCPClient(b, p, []string{"h2"})
	direct := &http.Transport{MaxIdleConnsPerHost: 64}
	defer direct.CloseIdleConnections()
	clients := []struct {
		name   string
		client *http.Client
		url    string
	}{
		{"direct", &http.Client{Transport: direct}, up.URL + "/"},
		{"gmgate-tlcp", tlcpClient(b, p, nil), gatewayURL(s, "/")},
		{"gmgate-tls13", tlsClient(b, p), gatewayURL(s, "/")},
		{"gmgate-tlcp-h2", tlcpH2, gatewayURL(s, "/")},
		{"gmgate-tls13-h2", h2TLSClient(b, p), gatewayURL(s, "/")},
	}
	for _, c := range clients {
		for _, conc := range []int{1, 8} {
			b.Run(c.name+"/clients="+strconv.Itoa(conc), func(b *testing.B) {
				measureGets(b, conc, c.client, c.url)
			})
		}
	}
}

// measureGets sends b.N keep-alive GETs of url from conc goroutines (one
// first, to connect outside the measurement) and reports requests per
// second and the latency percentiles.
func measureGets(b *testing.B, conc int, client *http.Client, url string) {
	get := func() {
		resp, err := client.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	get()
	lat := make([][]time.Duration, conc)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range conc {
		n := b.N / conc
		if w < b.N%conc {
			n++
		}
		lat[w] = make([]time.Duration, 0, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				t0 := time.Now()
				get()
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(percentile(all, 50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(percentile(all, 99).Microseconds()), "p99-µs")
}

func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	if i > 0 {
		i--
	}
	return sorted[i]
}

// BenchmarkClientMode measures client mode: keep-alive HTTP requests from
// a plain client to an http listener that forwards to a tlcp:// upstream
// (a second gateway in front of the service), beside the same listener
// forwarding to the service's http:// address and a TLCP client calling
// the second gateway itself. The TLCP leg's cost is the difference.
//
//	go test -run '^$' -bench ClientMode -benchtime 3000x -count 6 ./proxy/
func BenchmarkClientMode(b *testing.B) {
	p := getPKI(b)
	body := []byte("hello from the upstream\n")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(body)
	}))
	defer up.Close()
	svc := startServer(b, testConfig(p, up.URL), nil)
	tlcpSection := "ca: " + p.dual.CACert + "\nserver_name: localhost"
	viaTLCP, _ := clientGateway(b, "http", `"tlcp://`+svc.Addr("edge").String()+`"`, tlcpSection, "")
	viaTLCPH2, _ := clientGateway(b, "http", `"tlcp://`+svc.Addr("edge").String()+`"`, tlcpSection, "http2: true")
	viaHTTP, _ := clientGateway(b, "http", `"`+up.URL+`"`, "", "")
	plain := &http.Transport{MaxIdleConnsPerHost: 64}
	defer plain.CloseIdleConnections()
	for _, c := range []struct {
		name   string
		conc   int
		client *http.Client
		url    string
	}{
		{"http-to-http", 1, &http.Client{Transport: plain}, "http://" + viaHTTP.Addr("app").String() + "/"},
		{"http-to-tlcp", 1, &http.Client{Transport: plain}, "http://" + viaTLCP.Addr("app").String() + "/"},
		{"tlcp-client", 1, tlcpClient(b, p, nil), gatewayURL(svc, "/")},
		// HTTP/2 over TLCP (http2: true) beside HTTP/1.1, one request at
		// a time and 16 at once (one multiplexed connection against 16).
		{"http-to-tlcp-h2", 1, &http.Client{Transport: plain}, "http://" + viaTLCPH2.Addr("app").String() + "/"},
		{"http-to-tlcp-c16", 16, &http.Client{Transport: plain}, "http://" + viaTLCP.Addr("app").String() + "/"},
		{"http-to-tlcp-h2-c16", 16, &http.Client{Transport: plain}, "http://" + viaTLCPH2.Addr("app").String() + "/"},
	} {
		b.Run(c.name, func(b *testing.B) { measureGets(b, c.conc, c.client, c.url) })
	}
}
