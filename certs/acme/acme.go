package acme

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/gmgate/gmgate/certs"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Options configure ACME issuance for the TLS side.
type Options struct {
	// StateDir is gmgate's state directory; certificates, keys and the
	// ACME account live under StateDir/acme.
	StateDir string
	// Domains are the names to obtain certificates for.
	Domains []string
	// DirectoryURL is the ACME directory; Let's Encrypt's production
	// directory when empty.
	DirectoryURL string
	// Email is the ACME account contact (optional).
	Email string
	// TrustedRoots verify the ACME server's HTTPS certificate (a private
	// ACME CA); the system roots when nil.
	TrustedRoots *x509.CertPool
	// HTTPPort and TLSALPNPort are where the challenge solvers listen
	// (80 and 443 when zero). When the port is already served by gmgate,
	// serve HTTPChallengeHandler (HTTP-01) or use TLSConfig (TLS-ALPN-01)
	// there instead.
	HTTPPort, TLSALPNPort int
	// ListenHost is the address the solvers bind to (all when empty).
	ListenHost string
	// DisableHTTPChallenge and DisableTLSALPNChallenge turn a challenge
	// type off.
	DisableHTTPChallenge, DisableTLSALPNChallenge bool
	// DisableOCSPStapling turns off certmagic's OCSP stapling, which
	// is on by default.
	DisableOCSPStapling bool
	// KeyType of the certificates: "p256" (default), "p384", "rsa2048",
	// "rsa4096".
	KeyType string
	// Logger receives certmagic's messages; slog.Default when nil.
	Logger *slog.Logger
	// Name labels the managed certificates in logs and metrics (the
	// listener's name, say).
	Name string
	// Storage keeps the account, keys, certificates and locks instead of
	// StateDir/acme: a RedisStorage shared by replicas.
	Storage certmagic.Storage
}

// Manager obtains and renews TLS certificates with certmagic.
type Manager struct {
	cfg     *certmagic.Config
	issuer  *certmagic.ACMEIssuer
	cache   *certmagic.Cache
	domains []string

	name string
	log  *slog.Logger

	mu       sync.Mutex
	obtained map[string]bool
	failures map[string]string
	// issuance counts obtain and renewal results, by kind and result.
	issuance map[[2]string]uint64
	changed  chan struct{}
	// stopManaging cancels what Start began: certmagic's orders, with
	// their retries and the locks they hold.
	stopManaging []context.CancelFunc
}

var acmeKeyTypes = map[string]certmagic.KeyType{
	"": certmagic.P256, "p256": certmagic.P256, "p384": certmagic.P384,
	"rsa2048": certmagic.RSA2048, "rsa4096": certmagic.RSA4096,
}

// New prepares ACME management; Manage obtains the certificates.
func New(opts Options) (*Manager, error) {
	if opts.StateDir == "" && opts.Storage == nil {
		return nil, errors.New("acme: no state directory; set the state directory so that certificates and the account survive restarts")
	}
	if len(opts.Domains) == 0 {
		return nil, errors.New("acme: no domains")
	}
	keyType, ok := acmeKeyTypes[opts.KeyType]
	if !ok {
		return nil, fmt.Errorf("acme: unknown key type %q (p256, p384, rsa2048, rsa4096)", opts.KeyType)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	zl := zap.New(&slogCore{log: log.With("component", "acme")})
	a := &Manager{
		domains: append([]string(nil), opts.Domains...), name: opts.Name, log: log,
		obtained: map[string]bool{}, failures: map[string]string{}, issuance: map[[2]string]uint64{},
		changed: make(chan struct{}, 1),
	}
	a.cache = certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert: func(certmagic.Certificate) (*certmagic.Config, error) { return a.cfg, nil },
		Logger:           zl,
	})
	storage := opts.Storage
	if storage == nil {
		storage = &certmagic.FileStorage{Path: filepath.Join(opts.StateDir, "acme")}
	}
	a.cfg = certmagic.New(a.cache, certmagic.Config{
		Storage:   storage,
		KeySource: certmagic.StandardKeyGenerator{KeyType: keyType},
		Logger:    zl,
		OnEvent:   a.onEvent,
		OCSP:      certmagic.OCSPConfig{DisableStapling: opts.DisableOCSPStapling},
	})
	ca := opts.DirectoryURL
	if ca == "" {
		ca = certmagic.LetsEncryptProductionCA
	}
	a.issuer = certmagic.NewACMEIssuer(a.cfg, certmagic.ACMEIssuer{
		CA:                      ca,
		Email:                   opts.Email,
		Agreed:                  true,
		TrustedRoots:            opts.TrustedRoots,
		AltHTTPPort:             opts.HTTPPort,
		AltTLSALPNPort:          opts.TLSALPNPort,
		ListenHost:              opts.ListenHost,
		DisableHTTPChallenge:    opts.DisableHTTPChallenge,
		DisableTLSALPNChallenge: opts.DisableTLSALPNChallenge,
		Logger:                  zl,
	})
	a.cfg.Issuers = []certmagic.Issuer{a.issuer}
	return a, nil
}

// onEvent records certmagic's issuance results for Manage.
func (a *Manager) onEvent(_ context.Context, event string, data map[string]any) error {
	name, _ := data["identifier"].(string)
	if event == "cached_managed_cert" {
		// Loaded from storage: one another replica obtained, say.
		a.signalChanged()
		return nil
	}
	if name == "" {
		return nil
	}
	kind := "new"
	if renewal, _ := data["renewal"].(bool); renewal {
		kind = "renewal"
	}
	a.mu.Lock()
	switch event {
	case "cert_obtained":
		a.obtained[name] = true
		a.issuance[[2]string{kind, "success"}]++
	case "cert_failed":
		a.failures[name] = fmt.Sprint(data["error"])
		a.issuance[[2]string{kind, "failure"}]++
	}
	a.mu.Unlock()
	switch event {
	case "cert_obtained":
		a.log.Info("ACME certificate obtained", "name", a.name, "domain", name, "kind", kind)
	case "cert_failed":
		a.log.Error("ACME certificate not obtained; the order is tried again later unless the CA's answer rules it out (\"ACME gave up\" then says so)", "name", a.name, "domain", name, "kind", kind, "cause", fmt.Sprint(data["error"]))
	}
	a.signalChanged()
	return nil
}

// signalChanged wakes Manage.
func (a *Manager) signalChanged() {
	select {
	case a.changed <- struct{}{}:
	default:
	}
}

// Manage loads the domains' certificates from the state directory or
// obtains them, waiting until every domain has one or ctx is done, and
// keeps them renewed in the background until Stop. It never prompts (an
// empty Email registers an account without contact).
func (a *Manager) Manage(ctx context.Context) error {
	if err := a.Start(ctx); err != nil {
		return err
	}
	for {
		var pending []string
		var lastErr string
		for _, d := range a.domains {
			if len(a.cache.AllMatchingCertificates(d)) > 0 {
				continue
			}
			a.mu.Lock()
			obtained, failure := a.obtained[d], a.failures[d]
			a.mu.Unlock()
			if obtained {
				// Saved before the event; cache it now rather than wait
				// for certmagic to.
				if _, err := a.cfg.CacheManagedCertificate(ctx, d); err == nil {
					continue
				}
			}
			pending = append(pending, d)
			if failure != "" {
				lastErr = failure
			}
		}
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-a.changed:
		case <-ctx.Done():
			if lastErr == "" {
				lastErr = ctx.Err().Error()
			}
			return fmt.Errorf("acme: no certificate yet for %s (certmagic keeps retrying): %s", strings.Join(pending, ", "), lastErr)
		}
	}
}

// SetChallengePorts says where gmgate itself answers the challenges:
// the port of the http listener (HTTP-01) and of the TLS listener
// (TLS-ALPN-01). certmagic finds them in use and leaves them to gmgate
// instead of starting servers of its own. Call it before Start.
func (a *Manager) SetChallengePorts(httpPort, tlsALPNPort int) {
	a.issuer.AltHTTPPort = httpPort
	a.issuer.AltTLSALPNPort = tlsALPNPort
}

// Start loads the domains' certificates from the state directory and
// obtains the missing ones in the background, then keeps them renewed
// until Stop or ctx is done. It does not wait for issuance (see Manage).
func (a *Manager) Start(ctx context.Context) error {
	// certmagic retries a failed order for up to 30 days, holding the
	// order's lock: only cancelling its context ends that, so that the
	// manager that replaces this one on a reload, or another replica,
	// does not wait behind an order with stale settings.
	ctx, cancel := context.WithCancel(ctx)
	a.mu.Lock()
	a.stopManaging = append(a.stopManaging, cancel)
	a.mu.Unlock()
	for _, d := range a.domains {
		go a.manage(ctx, d)
	}
	if rs, ok := a.cfg.Storage.(*RedisStorage); ok {
		go a.reseal(ctx, rs)
	}
	return nil
}

// reseal seals the shared storage's values again with the first sealing
// key, trying again while Redis fails: a manager starts on the reload
// that moves a new key first.
func (a *Manager) reseal(ctx context.Context, rs *RedisStorage) {
	for wait := acmeRetry; ; wait = min(2*wait, acmeRetryMax) {
		n, unopened, err := rs.Reseal(ctx)
		if n > 0 {
			a.log.Info("ACME data in Redis sealed again with the first sealing key", "name", a.name, "values", n)
		}
		if err == nil {
			if len(unopened) > 0 {
				a.log.Error("ACME data in Redis does not open with any sealing key", "name", a.name, "keys", unopened, "fix", "add the key that sealed it back to the sealing keys, or delete these keys from Redis to let ACME obtain again")
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		a.log.Error("ACME data in Redis not sealed again with the first sealing key; keep the other keys until it is", "name", a.name, "cause", err.Error())
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// acmeRetry is how long manage gives certmagic to load a certificate
// before it tries again; the wait doubles up to acmeRetryMax.
const (
	acmeRetry    = 5 * time.Second
	acmeRetryMax = 5 * time.Minute
)

// manage has certmagic manage domain's certificate, trying again until
// the certificate is in the cache or ctx is done. certmagic retries a
// failed order, but tries only once to load a certificate from storage
// or to take an order's lock: a storage that fails then (a shared Redis
// still starting, failing over, out of memory) would leave the domain
// without a certificate until a restart.
func (a *Manager) manage(ctx context.Context, domain string) {
	// As ManageAsync names it: the lock's name and the cache's key.
	domain = strings.ToLower(strings.TrimSpace(domain))
	for wait := acmeRetry; ; wait = min(2*wait, acmeRetryMax) {
		// At once when storage holds the certificate; otherwise it takes
		// the lock and orders, retrying failed orders as certmagic does.
		err := a.cfg.ObtainCertAsync(ctx, domain)
		if noRetry := (certmagic.ErrNoRetry{}); errors.As(err, &noRetry) {
			// The CA refuses what its staging CA took: ordering again
			// would only meet its rate limits.
			a.log.Error("ACME gave up on the certificate; reload or restart to try again", "name", a.name, "domain", domain, "cause", err.Error())
			return
		}
		if err == nil {
			// Load it, renew it when due, and keep it renewed.
			// ManageAsync does not prompt on the terminal, unlike
			// ManageSync.
			err = a.cfg.ManageAsync(ctx, []string{domain})
		}
		// ManageAsync loads in the background.
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if len(a.cache.AllMatchingCertificates(domain)) > 0 {
			return
		}
		cause := "not loaded from storage"
		if err != nil {
			cause = err.Error()
		}
		a.log.Error("ACME has no certificate yet; trying again", "name", a.name, "domain", domain, "cause", cause)
	}
}

// Domains returns the names the certificates are for.
func (a *Manager) Domains() []string { return a.domains }

var acmeIssuanceDesc = prometheus.NewDesc("gmgate_acme_issuance_total",
	"ACME certificate orders by certificate set, kind (new, renewal) and result (success, failure).", []string{"name", "kind", "result"}, nil)

// Describe implements prometheus.Collector.
func (a *Manager) Describe(ch chan<- *prometheus.Desc) {
	ch <- acmeIssuanceDesc
	ch <- certs.ExpiryDesc()
}

// Collect implements prometheus.Collector: the issuance counters and the
// expiry of each managed certificate (gmgate_certificate_expiry_timestamp_seconds
// with role "acme" and the domain as name).
func (a *Manager) Collect(ch chan<- prometheus.Metric) {
	a.mu.Lock()
	for _, kind := range []string{"new", "renewal"} {
		for _, result := range []string{"success", "failure"} {
			ch <- prometheus.MustNewConstMetric(acmeIssuanceDesc, prometheus.CounterValue, float64(a.issuance[[2]string{kind, result}]), a.name, kind, result)
		}
	}
	a.mu.Unlock()
	for _, d := range a.domains {
		for _, c := range a.cache.AllMatchingCertificates(d) {
			if c.Leaf != nil {
				ch <- prometheus.MustNewConstMetric(certs.ExpiryDesc(), prometheus.GaugeValue, float64(c.Leaf.NotAfter.Unix()), d, "acme")
				break
			}
		}
	}
}

// GetCertificate serves the managed certificates (and TLS-ALPN-01
// challenges); for tls.Config.GetCertificate or StoreOptions.TLSFallback.
func (a *Manager) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	return a.cfg.GetCertificate(hello)
}

// HTTPChallengeHandler answers HTTP-01 challenges and passes everything
// else to next; mount it on the port-80 listener.
func (a *Manager) HTTPChallengeHandler(next http.Handler) http.Handler {
	return a.issuer.HTTPChallengeHandler(next)
}

// HandleHTTPChallenge answers r when it is an HTTP-01 challenge request
// and reports whether it was.
func (a *Manager) HandleHTTPChallenge(w http.ResponseWriter, r *http.Request) bool {
	return a.issuer.HandleHTTPChallenge(w, r)
}

// Stop ends background renewal and the orders in progress, releasing
// their locks.
func (a *Manager) Stop() {
	a.mu.Lock()
	for _, cancel := range a.stopManaging {
		cancel()
	}
	a.stopManaging = nil
	a.mu.Unlock()
	a.cache.Stop()
}

// slogCore forwards certmagic's zap logging to slog.
type slogCore struct {
	log    *slog.Logger
	fields []zapcore.Field
}

func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= zapcore.InfoLevel }

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{log: c.log, fields: append(append([]zapcore.Field(nil), c.fields...), fields...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range append(append([]zapcore.Field(nil), c.fields...), fields...) {
		f.AddTo(enc)
	}
	attrs := make([]any, 0, 2*len(enc.Fields))
	for k, v := range enc.Fields {
		attrs = append(attrs, k, v)
	}
	level := slog.LevelInfo
	switch {
	case e.Level >= zapcore.ErrorLevel:
		level = slog.LevelError
	case e.Level == zapcore.WarnLevel:
		level = slog.LevelWarn
	}
	c.log.Log(context.Background(), level, e.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }
