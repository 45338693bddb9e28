package bench

import (
	"bufio"
	"context"
	"crypto"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmgate/gmgate/certs"
	"github.com/gmgate/gmgate/internal/connworkers"
	"github.com/gmgate/gmgate/internal/tcplisten"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/gmgate/gmgate/tlcp/tls13"
)

// childConfig is what the parent tells the server child, as JSON in its
// command line.
type childConfig struct {
	// Protocol is "tlcp", "tls" (TLS 1.2 and 1.3) or "tls13sm" (TLS 1.3
	// ShangMi, with the TLCP signing pair).
	Protocol string `json:"protocol"`
	// CPUs the child binds itself to; none leaves it unbound.
	CPUs []int `json:"cpus,omitempty"`
	// GOMAXPROCS for the child; 0 leaves Go's default.
	GOMAXPROCS int `json:"gomaxprocs,omitempty"`
	// The TLCP identity: certificate files and accel key references.
	SignCert string `json:"sign_cert,omitempty"`
	SignKey  string `json:"sign_key,omitempty"`
	EncCert  string `json:"enc_cert,omitempty"`
	EncKey   string `json:"enc_key,omitempty"`
	// The TLS identity: an ECDSA certificate file and key reference.
	TLSCert string `json:"tls_cert,omitempty"`
	TLSKey  string `json:"tls_key,omitempty"`
	// HTTPBody is the size of the body of the response to an HTTP request.
	HTTPBody int `json:"http_body"`
	// HandshakeTimeout bounds each connection's handshake.
	HandshakeTimeout time.Duration `json:"handshake_timeout"`
	// CPUProfile is the file the "profile-start" command writes a CPU
	// profile to, until "profile-stop".
	CPUProfile string `json:"cpu_profile,omitempty"`
}

// childReady is the child's first line on stdout.
type childReady struct {
	Addr       string `json:"addr,omitempty"`
	PID        int    `json:"pid,omitempty"`
	CPUs       []int  `json:"cpus,omitempty"`
	GOMAXPROCS int    `json:"gomaxprocs,omitempty"`
	KeyBackend string `json:"key_backend,omitempty"`
	Error      string `json:"error,omitempty"`
}

// childStats is the child's answer to "stats".
type childStats struct {
	UserNs          int64  `json:"user_ns"`
	SysNs           int64  `json:"sys_ns"`
	Handshakes      int64  `json:"handshakes"`
	Resumed         int64  `json:"resumed"`
	HandshakeErrors int64  `json:"handshake_errors"`
	Requests        int64  `json:"requests"`
	Error           string `json:"error,omitempty"`
}

func (s childStats) cpu() time.Duration { return time.Duration(s.UserNs + s.SysNs) }

// ServeChild runs the benchmark server of a child process: it binds itself
// to the CPUs it was given, listens on a loopback port, says where on out,
// then answers each "stats" line read from control with its CPU time (from
// getrusage) and counters, until control reaches EOF; "profile-start" and
// "profile-stop" bracket a CPU profile when the configuration names a file.
// The parent runs it through a hidden subcommand so that the server's CPU
// time is its own.
func ServeChild(ctx context.Context, configJSON string, control io.Reader, out io.Writer) error {
	enc := json.NewEncoder(out)
	var cfg childConfig
	if err := json.Unmarshal([]byte(configJSON), &cfg); err != nil {
		err = fmt.Errorf("bad server configuration: %w", err)
		_ = enc.Encode(childReady{Error: err.Error()})
		return err
	}
	srv, ready, err := startChildServer(ctx, cfg)
	if err != nil {
		_ = enc.Encode(childReady{Error: err.Error()})
		return err
	}
	defer srv.shutdown()
	if err := enc.Encode(ready); err != nil {
		return err
	}
	var prof profile
	defer prof.stop()
	sc := bufio.NewScanner(control)
	for sc.Scan() {
		var reply childStats
		switch cmd := strings.TrimSpace(sc.Text()); cmd {
		case "stats":
			reply = srv.stats()
		case "profile-start":
			if err := prof.start(cfg.CPUProfile); err != nil {
				reply.Error = err.Error()
			}
		case "profile-stop":
			if err := prof.stop(); err != nil {
				reply.Error = err.Error()
			}
		case "":
			continue
		default:
			reply.Error = "unknown command " + strconv.Quote(cmd)
		}
		if err := enc.Encode(reply); err != nil {
			return err
		}
	}
	return nil
}

// profile is a CPU profile being written.
type profile struct{ f *os.File }

func (p *profile) start(name string) error {
	if name == "" {
		return errors.New("no profile file configured")
	}
	if p.f != nil {
		return errors.New("a profile is already being written")
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	p.f = f
	return nil
}

func (p *profile) stop() error {
	if p.f == nil {
		return nil
	}
	pprof.StopCPUProfile()
	err := p.f.Close()
	p.f = nil
	return err
}

// childServer accepts TLCP or TLS connections, completes each handshake,
// answers at most one HTTP request, and counts.
type childServer struct {
	ln        net.Listener
	wrap      func(net.Conn) handshaker
	body      []byte
	timeout   time.Duration
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	mu        sync.Mutex
	conns     map[net.Conn]struct{}
	handshake atomic.Int64
	resumed   atomic.Int64
	failed    atomic.Int64
	requests  atomic.Int64
}

// handshaker is what the server and the load generator need of a TLCP or
// TLS connection.
type handshaker interface {
	net.Conn
	HandshakeContext(context.Context) error
	CloseWrite() error
}

func didResume(c handshaker) bool {
	switch c := c.(type) {
	case *tlcp.Conn:
		return c.ConnectionState().DidResume
	case *tls.Conn:
		return c.ConnectionState().DidResume
	case *tls13.Conn:
		return c.ConnectionState().DidResume
	}
	return false
}

func startChildServer(ctx context.Context, cfg childConfig) (*childServer, childReady, error) {
	ready := childReady{}
	if len(cfg.CPUs) > 0 {
		if err := pinProcess(cfg.CPUs); err != nil {
			return nil, ready, err
		}
		ready.CPUs = cfg.CPUs
	}
	if cfg.GOMAXPROCS > 0 {
		runtime.GOMAXPROCS(cfg.GOMAXPROCS)
	}
	ready.GOMAXPROCS = runtime.GOMAXPROCS(0)
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 10 * time.Second
	}

	s := &childServer{conns: map[net.Conn]struct{}{}, timeout: cfg.HandshakeTimeout, body: make([]byte, max(cfg.HTTPBody, 0))}
	for i := range s.body {
		s.body[i] = 'a' + byte(i%26)
	}
	switch cfg.Protocol {
	case "tlcp":
		// The files come from the command's flags.
		cert, _, err := certs.LoadTLCPFiles(certs.TLCPFiles{SignCert: cfg.SignCert, SignKey: cfg.SignKey, EncCert: cfg.EncCert, EncKey: cfg.EncKey},
			certs.LoadOptions{Names: certs.FieldNames{SignCert: "--sign-cert", SignKey: "--sign-key", EncCert: "--enc-cert", EncKey: "--enc-key"}})
		if err != nil {
			return nil, ready, fmt.Errorf("loading the server's TLCP certificates: %w", err)
		}
		ready.KeyBackend = keyBackend(cert.SignKey) + "/" + keyBackend(cert.EncKey)
		tc := &tlcp.Config{Certificates: []tlcp.Certificate{*cert}}
		s.wrap = func(c net.Conn) handshaker { return tlcp.Server(c, tc) }
	case "tls13sm":
		// TLS 1.3 has one certificate a side: the TLCP signing pair.
		cert, _, err := certs.LoadTLCPFiles(certs.TLCPFiles{SignCert: cfg.SignCert, SignKey: cfg.SignKey},
			certs.LoadOptions{SignOnly: true, Names: certs.FieldNames{SignCert: "--sign-cert", SignKey: "--sign-key"}})
		if err != nil {
			return nil, ready, fmt.Errorf("loading the server's SM2 signing certificate: %w", err)
		}
		signer, ok := cert.SignKey.(crypto.Signer)
		if !ok {
			return nil, ready, fmt.Errorf("the server's signing key (%s) cannot sign", keyBackend(cert.SignKey))
		}
		ready.KeyBackend = keyBackend(cert.SignKey)
		tc := &tls13.Config{Certificates: []tls13.Certificate{{Certificate: cert.SignCertificate, PrivateKey: signer, Leaf: cert.SignLeaf}}}
		s.wrap = func(c net.Conn) handshaker { return tls13.Server(c, tc) }
	case "tls":
		cert, err := certs.LoadTLS(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, ready, fmt.Errorf("loading the server's TLS certificate: %w", err)
		}
		ready.KeyBackend = keyBackend(cert.PrivateKey)
		// crypto/tls refuses a TLS 1.2 handshake when an ECDSA key also
		// offers Decrypt (it takes any crypto.Decrypter for an RSA key),
		// and accel's software keys always do: show it only Sign.
		if signer, ok := cert.PrivateKey.(crypto.Signer); ok {
			cert.PrivateKey = signerOnly{signer}
		}
		tc := &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12}
		s.wrap = func(c net.Conn) handshaker { return tls.Server(c, tc) }
	default:
		return nil, ready, fmt.Errorf("unknown server protocol %q", cfg.Protocol)
	}
	// Listen as gmgate serve does: keep-alive set on the listener, and
	// connections handed over once their ClientHello is in.
	ln, err := tcplisten.Config{KeepAlive: tcplisten.KeepAlive, DeferAccept: cfg.HandshakeTimeout}.Listen(ctx, "127.0.0.1:0")
	if err != nil {
		return nil, ready, err
	}
	s.ln = ln
	s.ctx, s.cancel = context.WithCancel(ctx)
	ready.Addr = ln.Addr().String()
	ready.PID = os.Getpid()
	s.wg.Add(1)
	go s.acceptLoop()
	return s, ready, nil
}

// keyBackend names the accel backend holding a key, or its type.
func keyBackend(k any) string {
	if b, ok := k.(interface{ Backend() string }); ok {
		return b.Backend()
	}
	return fmt.Sprintf("%T", k)
}

func (s *childServer) acceptLoop() {
	defer s.wg.Done()
	// As in gmgate serve, connections run on goroutines kept for the next
	// one, whose stacks have grown to a handshake's depth already.
	workers := connworkers.New()
	defer workers.Stop()
	var delay time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || s.ctx.Err() != nil {
				return
			}
			// Out of file descriptors and the like: back off and go on.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			time.Sleep(delay)
			continue
		}
		delay = 0
		if !s.track(c, true) {
			c.Close()
			return
		}
		s.wg.Add(1)
		workers.Run(func() { s.serve(c) })
	}
}

// track adds or removes a live connection; adding fails once shutting
// down.
func (s *childServer) track(c net.Conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		if s.conns == nil {
			return false
		}
		s.conns[c] = struct{}{}
	} else if s.conns != nil {
		delete(s.conns, c)
	}
	return true
}

func (s *childServer) serve(raw net.Conn) {
	defer s.wg.Done()
	defer s.track(raw, false)
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(s.timeout))
	c := s.wrap(raw)
	// As in gmgate serve, the deadline bounds the handshake and shutdown
	// closes the connection: a context that can be cancelled would cost
	// every handshake a callback registered on it and taken off again.
	if err := c.HandshakeContext(context.Background()); err != nil {
		s.failed.Add(1)
		return
	}
	s.handshake.Add(1)
	if didResume(c) {
		s.resumed.Add(1)
	}
	defer c.Close()
	// The client either closes (load without requests) or sends one
	// HTTP request and reads the response. The reader is kept for the
	// next connection, as net/http keeps its own.
	br := requestReaders.Get().(*bufio.Reader)
	br.Reset(c)
	defer func() {
		br.Reset(nil)
		requestReaders.Put(br)
	}()
	if _, err := br.Peek(1); err != nil {
		return
	}
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, req.Body)
	req.Body.Close()
	s.requests.Add(1)
	hdr := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", len(s.body))
	bw := bufio.NewWriterSize(c, 16384)
	_, _ = bw.WriteString(hdr)
	_, _ = bw.Write(s.body)
	_ = bw.Flush()
}

// requestReaders hold the buffered readers of the connections' requests.
var requestReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}

func (s *childServer) stats() childStats {
	st := childStats{
		Handshakes:      s.handshake.Load(),
		Resumed:         s.resumed.Load(),
		HandshakeErrors: s.failed.Load(),
		Requests:        s.requests.Load(),
	}
	u, sys, err := processCPUTime()
	if err != nil {
		st.Error = err.Error()
	}
	st.UserNs, st.SysNs = int64(u), int64(sys)
	return st
}

// shutdown stops accepting, closes live connections and waits for their
// goroutines.
func (s *childServer) shutdown() {
	s.cancel()
	s.ln.Close()
	s.mu.Lock()
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	s.wg.Wait()
}

// signerOnly hides every method of a key but those of crypto.Signer.
type signerOnly struct{ crypto.Signer }
