package certs

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/fsnotify/fsnotify"
	"github.com/gmgate/gmgate/accel"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/prometheus/client_golang/prometheus"
)

// Source is one named certificate set of the configuration: a TLCP pair,
// a TLS certificate, an SM2 certificate for TLS 1.3, or some of them.
type Source struct {
	// Name labels the set in logs and metrics (the listener's name, say).
	Name string
	TLCP *TLCPFiles
	TLS  *TLSFiles
	// SM2 is an SM2 signing certificate and key that serve TLS 1.3 with
	// the ShangMi suites (a site's tls.sm2): its problems are reported
	// on the side "tls.sm2", with the fields cert and key.
	SM2 *SM2Files
	// SignOnly lets the TLCP identity go without an encryption pair
	// (LoadOptions.SignOnly), as a client identity may.
	SignOnly bool
}

// StoreOptions configure a Store.
type StoreOptions struct {
	// Logger receives reload results and warnings; slog.Default when nil.
	Logger *slog.Logger
	// Load are the checks applied on every load.
	Load LoadOptions
	// TLSFallback, when set, is asked for a TLS certificate when no
	// source's TLS certificate names the requested server (ACME's
	// GetCertificate, for instance).
	TLSFallback func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// OnReload, when set, is called after every reload attempt with its
	// result.
	OnReload func(error)
	// Debounce is how long Watch waits for file changes to settle before
	// reloading; 250ms when zero.
	Debounce time.Duration
	// Stapler, when set, staples OCSP responses to the TLS certificates
	// of sources that ask for it (TLSFiles.OCSPStapling). It outlives
	// the store: stores that replace one another share it, so that an
	// unchanged certificate keeps its response.
	Stapler *Stapler
	// CloseDelay is how long the keys of a set replaced by Reload (or of
	// a Retired store) stay open: handshakes that chose its certificates
	// before the swap still use them. It should be the longest a
	// handshake may take (timeouts.handshake); the keys close at once
	// when zero.
	CloseDelay time.Duration
}

// Store holds the live certificates. Reads are lock-free; a reload loads
// every source and swaps the whole set at once, or keeps the old set.
type Store struct {
	opts    StoreOptions
	sources []Source
	log     *slog.Logger

	current  atomic.Pointer[certSet]
	reloadMu sync.Mutex

	// closeMu guards retiring, the replaced sets whose keys close when
	// their timer fires, and closed.
	closeMu  sync.Mutex
	retiring map[*certSet]*time.Timer
	closed   bool

	reloadOK, reloadFailed atomic.Uint64
	lastReloadFailed       atomic.Bool
}

type certSet struct {
	entries  []storeEntry
	warnings []Warning
}

// Warning is something about a served certificate set that some peers
// reject but the proxy can serve.
type Warning struct {
	Source, Side, Msg string
}

type storeEntry struct {
	name string
	tlcp *tlcp.Certificate
	tls  *tls.Certificate
	// sm2 is the SM2 identity (a signing pair alone).
	sm2 *tlcp.Certificate
	// tlsStaple and tlcpStaple serve tls and tlcp with their OCSP
	// staples; nil when they are not stapled.
	tlsStaple  *stapled[tls.Certificate]
	tlcpStaple *stapled[tlcp.Certificate]
}

// tlsCertificate is the entry's TLS certificate as served now.
func (e *storeEntry) tlsCertificate() *tls.Certificate {
	if e.tlsStaple != nil {
		return e.tlsStaple.certificate(time.Now())
	}
	return e.tls
}

// tlcpCertificate is the entry's TLCP identity as served now.
func (e *storeEntry) tlcpCertificate() *tlcp.Certificate {
	if e.tlcpStaple != nil {
		return e.tlcpStaple.certificate(time.Now())
	}
	return e.tlcp
}

// NewStore loads every source; it fails when any of them is invalid, with
// every problem of every source (see FieldError). A store without sources
// serves nothing but TLSFallback.
func NewStore(opts StoreOptions, sources ...Source) (*Store, error) {
	seen := map[string]bool{}
	for i, src := range sources {
		if src.Name == "" {
			return nil, fmt.Errorf("certificate source %d has no name", i+1)
		}
		if seen[src.Name] {
			return nil, fmt.Errorf("certificate source name %q is used twice", src.Name)
		}
		seen[src.Name] = true
		if src.TLCP == nil && src.TLS == nil && src.SM2 == nil {
			return nil, fmt.Errorf("certificate source %q has neither tlcp, tls nor sm2 files", src.Name)
		}
	}
	s := &Store{opts: opts, sources: sources, log: opts.Logger, retiring: map[*certSet]*time.Timer{}}
	if s.log == nil {
		s.log = slog.Default()
	}
	set, err := s.load()
	if err != nil {
		return nil, err
	}
	s.current.Store(set)
	return s, nil
}

// load loads every source, and reports the problems of all of them.
func (s *Store) load() (*certSet, error) {
	set := &certSet{}
	var errs []error
	failed := func(name string, err error) {
		for _, leaf := range joined(err) {
			var fe *FieldError
			if errors.As(leaf, &fe) {
				fe.Source = name
				errs = append(errs, fe)
			} else {
				errs = append(errs, fmt.Errorf("%s: %w", name, leaf))
			}
		}
	}
	warn := func(name, side string, warnings []string) {
		for _, w := range warnings {
			s.log.Warn("certificate warning", "name", name, "warning", w)
			set.warnings = append(set.warnings, Warning{Source: name, Side: side, Msg: w})
		}
	}
	for _, src := range s.sources {
		e := storeEntry{name: src.Name}
		if src.TLCP != nil {
			opts := s.opts.Load
			opts.SignOnly = opts.SignOnly || src.SignOnly
			c, warnings, err := LoadTLCPFiles(*src.TLCP, opts)
			if err != nil {
				failed(src.Name, err)
			}
			warn(src.Name, "tlcp", warnings)
			e.tlcp = c
			if err == nil && c != nil && src.TLCP.OCSPStapling {
				if r := s.opts.Stapler.track(src.Name, c.SignCertificate); r != nil {
					e.tlcpStaple = &stapled[tlcp.Certificate]{base: c, record: r, with: tlcpWithStaple}
				}
			}
		}
		if src.TLS != nil {
			c, warnings, err := LoadTLSFiles(*src.TLS, s.opts.Load)
			if err != nil {
				failed(src.Name, err)
			}
			warn(src.Name, "tls", warnings)
			e.tls = c
			if err == nil && c != nil && src.TLS.OCSPStapling {
				if r := s.opts.Stapler.track(src.Name, c.Certificate); r != nil {
					e.tlsStaple = &stapled[tls.Certificate]{base: c, record: r, with: tlsWithStaple}
				}
			}
		}
		if src.SM2 != nil {
			c, warnings, err := loadSM2Files(*src.SM2, s.opts.Load)
			if err != nil {
				failed(src.Name, err)
			}
			warn(src.Name, sm2Side, warnings)
			e.sm2 = c
		}
		set.entries = append(set.entries, e)
	}
	if len(errs) > 0 {
		s.closeSet(set)
		if len(errs) == 1 {
			return nil, errs[0]
		}
		return nil, errors.Join(errs...)
	}
	return set, nil
}

// closeSet releases the keys of a set that serves no more. A key that
// cannot close cleanly (a card call that has not returned) is logged.
func (s *Store) closeSet(set *certSet) {
	for _, e := range set.entries {
		if e.tlsStaple != nil {
			s.opts.Stapler.release(e.tlsStaple.record)
		}
		if e.tlcpStaple != nil {
			s.opts.Stapler.release(e.tlcpStaple.record)
		}
		if e.tlcp != nil {
			s.closeKey(e.name, "tlcp sign_key", e.tlcp.SignKey)
			s.closeKey(e.name, "tlcp enc_key", e.tlcp.EncKey)
		}
		if e.tls != nil {
			s.closeKey(e.name, "tls key", e.tls.PrivateKey)
		}
		if e.sm2 != nil {
			s.closeKey(e.name, "tls.sm2 key", e.sm2.SignKey)
		}
	}
}

func (s *Store) closeKey(name, field string, k any) {
	c, ok := k.(interface{ Close() error })
	if !ok {
		return
	}
	if err := c.Close(); err != nil {
		s.log.Warn("closing a private key", "name", name, "key", field, "cause", err.Error())
	}
}

// retire closes the keys of set after CloseDelay, in the background (at
// once without a delay). The caller holds reloadMu, so that Close, which
// stops the waiting timers, does not run meanwhile.
func (s *Store) retire(set *certSet) {
	if s.opts.CloseDelay <= 0 {
		s.closeSet(set)
		return
	}
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	s.retiring[set] = time.AfterFunc(s.opts.CloseDelay, func() {
		s.closeMu.Lock()
		_, ok := s.retiring[set]
		delete(s.retiring, set)
		s.closeMu.Unlock()
		if ok {
			s.closeSet(set)
		}
	})
}

// joined returns the errors err joins (errors.Join), or err itself.
func joined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// Close releases at once the keys of the certificates in service
// (sessions on a crypto card) and those of sets a reload replaced that
// still wait for their CloseDelay; the store serves and reloads no more
// after it. Call it once no handshake uses the store.
func (s *Store) Close() {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	s.closeMu.Lock()
	var sets []*certSet
	if !s.closed {
		sets = append(sets, s.current.Load())
	}
	s.closed = true
	for set, t := range s.retiring {
		t.Stop()
		sets = append(sets, set)
	}
	clear(s.retiring)
	s.closeMu.Unlock()
	for _, set := range sets {
		s.closeSet(set)
	}
}

// Retire releases the keys of the store after CloseDelay, in the
// background, for a store that a new one replaces while handshakes may
// still use its certificates; it reloads no more after it. Close still
// closes at once what waits.
func (s *Store) Retire() {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	s.closeMu.Lock()
	closed := s.closed
	s.closed = true
	s.closeMu.Unlock()
	if !closed {
		s.retire(s.current.Load())
	}
}

// Closed reports whether the store holds no key any more: every key it
// opened is closed or closing.
func (s *Store) Closed() bool {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	return s.closed && len(s.retiring) == 0
}

// Warnings returns the warnings of the certificates in service.
func (s *Store) Warnings() []Warning {
	return s.current.Load().warnings
}

// Reload loads every source again and swaps the new set in. When any
// source fails to load, the previous set stays in service, the reason is
// logged, and the error is returned.
func (s *Store) Reload() error {
	s.reloadMu.Lock()
	s.closeMu.Lock()
	closed := s.closed
	s.closeMu.Unlock()
	if closed {
		s.reloadMu.Unlock()
		return errors.New("the certificate store is closed")
	}
	set, err := s.load()
	if err != nil {
		s.reloadFailed.Add(1)
		s.lastReloadFailed.Store(true)
		s.log.Error("certificate reload failed; keeping the previous certificates", "error", err.Error())
	} else {
		s.retire(s.current.Swap(set))
		s.reloadOK.Add(1)
		s.lastReloadFailed.Store(false)
		s.log.Info("certificates reloaded", "sets", len(set.entries))
	}
	s.reloadMu.Unlock()
	if s.opts.OnReload != nil {
		s.opts.OnReload(err)
	}
	return err
}

// TLCPCertificate returns the TLCP identity of the named source (nil when
// it has none).
func (s *Store) TLCPCertificate(name string) *tlcp.Certificate {
	entries := s.current.Load().entries
	for i := range entries {
		if entries[i].name == name {
			return entries[i].tlcpCertificate()
		}
	}
	return nil
}

// TLSCertificate returns the TLS certificate of the named source (nil when
// it has none).
func (s *Store) TLSCertificate(name string) *tls.Certificate {
	entries := s.current.Load().entries
	for i := range entries {
		if entries[i].name == name {
			return entries[i].tlsCertificate()
		}
	}
	return nil
}

// SM2Certificate returns the SM2 identity of the named source for TLS
// 1.3 ShangMi, a signing pair alone (nil when it has none).
func (s *Store) SM2Certificate(name string) *tlcp.Certificate {
	entries := s.current.Load().entries
	for i := range entries {
		if entries[i].name == name {
			return entries[i].sm2
		}
	}
	return nil
}

// GetTLCPCertificate chooses the TLCP identity whose signing certificate
// names the requested server (SNI), or the first one; for
// tlcp.Config.GetCertificate.
func (s *Store) GetTLCPCertificate(hello *tlcp.ClientHelloInfo) (*tlcp.Certificate, error) {
	var first *tlcp.Certificate
	entries := s.current.Load().entries
	for i := range entries {
		e := &entries[i]
		if e.tlcp == nil {
			continue
		}
		if first == nil {
			first = e.tlcpCertificate()
		}
		if hello != nil && hello.ServerName != "" && e.tlcp.SignLeaf != nil && e.tlcp.SignLeaf.VerifyHostname(hello.ServerName) == nil {
			return e.tlcpCertificate(), nil
		}
	}
	if first == nil {
		return nil, errors.New("no TLCP certificate configured")
	}
	return first, nil
}

// GetTLSCertificate chooses the TLS certificate that names the requested
// server, then asks TLSFallback, then takes the first one; for
// tls.Config.GetCertificate.
func (s *Store) GetTLSCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	var first *tls.Certificate
	entries := s.current.Load().entries
	for i := range entries {
		e := &entries[i]
		if e.tls == nil {
			continue
		}
		if first == nil {
			first = e.tlsCertificate()
		}
		if hello != nil && hello.ServerName != "" && e.tls.Leaf != nil && e.tls.Leaf.VerifyHostname(hello.ServerName) == nil {
			return e.tlsCertificate(), nil
		}
	}
	if s.opts.TLSFallback != nil {
		c, err := s.opts.TLSFallback(hello)
		if err == nil && c != nil {
			return c, nil
		}
		if first == nil {
			if err == nil {
				err = errors.New("no certificate")
			}
			return nil, err
		}
	}
	if first == nil {
		return nil, errors.New("no TLS certificate configured")
	}
	return first, nil
}

// watchedFiles lists the files the sources read: certificates, key files
// and password files.
func (s *Store) watchedFiles() []string {
	var files []string
	addRef := func(ref string) {
		if ref == "" {
			return // a sign-only identity has no encryption key
		}
		r, err := accel.ParseRef(ref)
		if err != nil || r.Scheme != "file" {
			return
		}
		files = append(files, r.Path)
		if pf := r.Params.Get("password-file"); pf != "" {
			files = append(files, pf)
		}
	}
	for _, src := range s.sources {
		if src.TLCP != nil {
			files = append(files, src.TLCP.SignCert)
			if src.TLCP.EncCert != "" {
				files = append(files, src.TLCP.EncCert)
			}
			addRef(src.TLCP.SignKey)
			addRef(src.TLCP.EncKey)
		}
		if src.TLS != nil {
			files = append(files, src.TLS.Cert)
			addRef(src.TLS.Key)
		}
		if src.SM2 != nil {
			files = append(files, src.SM2.Cert)
			addRef(src.SM2.Key)
		}
	}
	return files
}

// Watch reloads the store when any file it reads changes, until ctx is
// done. It watches the directories, so files replaced by rename (and
// Kubernetes' ..data symlink swaps) are seen. Changes are debounced so
// that a pair written file by file reloads once it is complete.
func (s *Store) Watch(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching certificate files: %w", err)
	}
	defer w.Close()
	names := map[string]bool{}
	dirs := map[string]bool{}
	for _, f := range s.watchedFiles() {
		abs, err := filepath.Abs(f)
		if err != nil {
			continue
		}
		names[abs] = true
		dirs[filepath.Dir(abs)] = true
	}
	for d := range dirs {
		if err := w.Add(d); err != nil {
			return fmt.Errorf("watching %s: %w", d, err)
		}
	}
	debounce := s.opts.Debounce
	if debounce <= 0 {
		debounce = 250 * time.Millisecond
	}
	timer := time.NewTimer(debounce)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			base := filepath.Base(ev.Name)
			if names[ev.Name] || strings.HasPrefix(base, "..") {
				timer.Reset(debounce)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			s.log.Warn("certificate watcher error", "error", err.Error())
		case <-timer.C:
			s.Reload()
		}
	}
}

var (
	expiryDesc = prometheus.NewDesc("gmgate_certificate_expiry_timestamp_seconds",
		"When each served certificate expires (NotAfter), as a Unix time.", []string{"name", "role"}, nil)
	notBeforeDesc = prometheus.NewDesc("gmgate_certificate_not_before_timestamp_seconds",
		"When each served certificate becomes valid (NotBefore), as a Unix time.", []string{"name", "role"}, nil)
	reloadsDesc = prometheus.NewDesc("gmgate_certificate_reloads_total",
		"Certificate reload attempts by result.", []string{"result"}, nil)
	reloadFailedDesc = prometheus.NewDesc("gmgate_certificate_last_reload_failed",
		"1 when the last reload failed and older certificates are still served.", nil, nil)
)

// ExpiryDesc describes gmgate_certificate_expiry_timestamp_seconds, the
// expiry of each served certificate by name and role, for the collectors
// of other certificate sources (ACME) to report in the same series.
func ExpiryDesc() *prometheus.Desc { return expiryDesc }

// Describe implements prometheus.Collector.
func (s *Store) Describe(ch chan<- *prometheus.Desc) {
	ch <- expiryDesc
	ch <- notBeforeDesc
	ch <- reloadsDesc
	ch <- reloadFailedDesc
	ch <- stapleStateDesc
	ch <- stapleNextUpdateDesc
	ch <- stapleFailuresDesc
}

// Collect implements prometheus.Collector: the expiry of every served
// certificate (roles sign, enc, tls) and the reload counters.
func (s *Store) Collect(ch chan<- prometheus.Metric) {
	emit := func(name, role string, c *smx509.Certificate) {
		if c == nil {
			return
		}
		ch <- prometheus.MustNewConstMetric(expiryDesc, prometheus.GaugeValue, float64(c.NotAfter.Unix()), name, role)
		ch <- prometheus.MustNewConstMetric(notBeforeDesc, prometheus.GaugeValue, float64(c.NotBefore.Unix()), name, role)
	}
	for _, e := range s.current.Load().entries {
		if e.tlcp != nil {
			emit(e.name, "sign", e.tlcp.SignLeaf)
			emit(e.name, "enc", e.tlcp.EncLeaf)
		}
		if e.tls != nil && len(e.tls.Certificate) > 0 {
			if c, err := smx509.ParseCertificate(e.tls.Certificate[0]); err == nil {
				emit(e.name, "tls", c)
			}
		}
		if e.sm2 != nil {
			emit(e.name, "sm2", e.sm2.SignLeaf)
		}
		if e.tlsStaple != nil {
			collectStaple(ch, e.name, "tls", e.tlsStaple.record, time.Now())
		}
		if e.tlcpStaple != nil {
			collectStaple(ch, e.name, "sign", e.tlcpStaple.record, time.Now())
		}
	}
	ch <- prometheus.MustNewConstMetric(reloadsDesc, prometheus.CounterValue, float64(s.reloadOK.Load()), "success")
	ch <- prometheus.MustNewConstMetric(reloadsDesc, prometheus.CounterValue, float64(s.reloadFailed.Load()), "failure")
	failed := 0.0
	if s.lastReloadFailed.Load() {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(reloadFailedDesc, prometheus.GaugeValue, failed)
}
