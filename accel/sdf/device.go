package sdf

import (
	"context"
	"crypto/ecdsa"
	"crypto/subtle"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmgate/gmgate/accel/internal/observe"
)

const backendName = "sdf"

// reopenHoldoff is the least time between two attempts to reopen a device
// that failed, so that a dead device is not hammered by every request.
const reopenHoldoff = 200 * time.Millisecond

// Observer receives what the backend does, for metrics: accel.Observer.
type Observer = observe.Observer

// devices holds the devices by library: a process opens a device once
// (many libraries refuse a second SDF_OpenDevice) and every key on it
// shares its sessions, which is what the card's licence counts. The mutex
// is never held across a call into a library, so that a call that does
// not return (a hung card or link) holds up no other library.
var devices = struct {
	sync.Mutex
	// m holds the devices in service or being opened.
	m map[string]*device
	// closing holds the devices whose last key closed and that are still
	// shutting down, waiting for a call in progress to return: the
	// library is not opened again before its previous device is closed.
	closing map[string]*device
}{m: map[string]*device{}, closing: map[string]*device{}}

// device is one opened SDF device with its pool of sessions. Each session
// belongs to one worker goroutine, which makes every call on it, so a
// session is never used by two calls at once.
type device struct {
	lib        library
	regKey     string
	profile    Profile
	sessions   int
	lockThread bool
	obs        Observer

	// mu is held for reading around every call on a session and for
	// writing to close and reopen the device handle.
	mu      sync.RWMutex
	handle  uintptr
	gen     uint64 // increases whenever the handle is closed
	isOpen  bool
	lastTry time.Time
	lastErr error

	keysMu sync.Mutex
	// refs counts the keys open on the device and the opens waiting for
	// it to open; under devices' mutex.
	refs int
	pins map[uint32]*pinEntry

	// opened is closed once the device is open, or failed to open with
	// openErr.
	opened  chan struct{}
	openErr error
	// closed is closed once the device has shut down: its sessions and
	// its handle are closed.
	closed chan struct{}

	workers []*worker
	reqs    chan *request
	quit    chan struct{}
	wg      sync.WaitGroup
}

// pinEntry is the access password for one key index, shared by the keys
// open at that index.
type pinEntry struct {
	pin    []byte
	source string
	refs   int // under keysMu

	// mu is held while the PIN is offered to the device, so that
	// sessions needing the access right at once (after a device reset)
	// offer it one after the other and only until it is refused.
	mu sync.Mutex
	// rejected is set when the device refused the PIN: it is not offered
	// again, because cards lock a key after a few failed attempts.
	rejected error
	// closed is set when the last key at the index closed and pin was
	// wiped.
	closed bool
	// pubs are the public keys of the keys open at the index, by usage,
	// as exported when each was opened and checked against its
	// certificate: a session that obtains the access right to the index
	// (a new session, after a device reset or a reopen) checks that the
	// device still holds them. Under mu.
	pubs [UsageEnc + 1]*ecdsa.PublicKey
}

type request struct {
	index uint32
	op    func(l library, sess uintptr) error
	done  chan error
}

// acquire returns the device for cfg's library, opening it on first use,
// and registers cfg's PIN for its index. An open of a library whose
// previous device is still closing waits for it within cfg.Timeout.
func acquire(ctx context.Context, cfg Config, obs Observer) (*device, error) {
	key := cfg.Library
	if abs, err := filepath.EvalSymlinks(cfg.Library); err == nil {
		key = abs
	}
	for {
		devices.Lock()
		if old := devices.closing[key]; old != nil {
			devices.Unlock()
			if err := old.awaitClosed(ctx, cfg); err != nil {
				return nil, err
			}
			continue
		}
		d := devices.m[key]
		opener := d == nil
		if opener {
			d = newDevice(cfg, obs, key)
			devices.m[key] = d
		} else if err := d.compatible(cfg); err != nil {
			devices.Unlock()
			return nil, err
		}
		d.refs++
		devices.Unlock()
		if opener {
			d.open(cfg)
		}
		select {
		case <-d.opened:
		case <-ctx.Done():
			d.drop(0)
			return nil, fmt.Errorf("SDF library %s: waiting for its device to open: %w", cfg.Library, ctx.Err())
		}
		if err := d.openErr; err != nil {
			d.drop(0)
			return nil, err
		}
		if err := d.addPIN(cfg); err != nil {
			d.drop(cfg.Timeout)
			return nil, err
		}
		return d, nil
	}
}

// release drops the hold of a key at index on the device (see drop).
func (d *device) release(index uint32, wait time.Duration) error {
	d.dropPIN(index)
	return d.drop(wait)
}

// drop drops one hold on the device, a key's or a waiting open's. With
// the last one the device leaves the registry at once and shuts down in
// the background: drop waits for that up to wait, and reports a shutdown
// that has not finished by then, which is when a call in progress has not
// returned.
func (d *device) drop(wait time.Duration) error {
	devices.Lock()
	d.refs--
	last := d.refs == 0 && d.openErr == nil
	if last {
		delete(devices.m, d.regKey)
		devices.closing[d.regKey] = d
	}
	devices.Unlock()
	if !last {
		return nil
	}
	go d.shutdown()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-d.closed:
		return nil
	case <-t.C:
		return fmt.Errorf("the device of SDF library %s closes in the background: a call on it has not returned%s; its sessions and the device are closed once it does", d.lib.path(), d.stuckFor())
	}
}

// awaitClosed waits, within ctx and cfg.Timeout, for the device to finish
// shutting down.
func (d *device) awaitClosed(ctx context.Context, cfg Config) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	select {
	case <-d.closed:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("SDF library %s cannot be opened again yet: its previous device is still closing, because a call on it has not returned%s (a hung card or link); the library opens again once that call returns: check the device and its link, or restart gmgate", cfg.Library, d.stuckFor())
	}
}

// stuckFor says for how long the oldest call in progress on the device
// has run, as " after 1.5s", or nothing when none is.
func (d *device) stuckFor() string {
	var oldest int64
	for _, w := range d.workers {
		if since := w.since.Load(); since != 0 && (oldest == 0 || since < oldest) {
			oldest = since
		}
	}
	if oldest == 0 {
		return ""
	}
	return fmt.Sprintf(" after %v", time.Since(time.Unix(0, oldest)).Round(time.Millisecond))
}

// sharedSettings ends a refusal of compatible: the settings are the
// device's, which stays open while any key on it serves, through reloads
// too.
const sharedSettings = "; the device is opened once for every key on it and keeps these settings while any key on it is open, so give the same in every reference to it, and restart gmgate to change them (a reload keeps the keys in service open)"

func (d *device) compatible(cfg Config) error {
	switch {
	case cfg.Profile != d.profile:
		return fmt.Errorf("SDF library %s is already open with %v, and this reference asks for %v"+sharedSettings, cfg.Library, d.profile, cfg.Profile)
	case cfg.Sessions != d.sessions:
		return fmt.Errorf("SDF library %s is already open with sessions=%d, and this reference asks for sessions=%d"+sharedSettings, cfg.Library, d.sessions, cfg.Sessions)
	case cfg.LockThread != d.lockThread:
		return fmt.Errorf("SDF library %s is already open with lock-thread=%v, and this reference asks for lock-thread=%v"+sharedSettings, cfg.Library, d.lockThread, cfg.LockThread)
	}
	return nil
}

func (d *device) addPIN(cfg Config) error {
	d.keysMu.Lock()
	defer d.keysMu.Unlock()
	e, refs := d.pins[cfg.Index], 0
	var pubs [UsageEnc + 1]*ecdsa.PublicKey
	if e != nil && ((e.pin == nil) != (cfg.PIN == nil) || subtle.ConstantTimeCompare(e.pin, cfg.PIN) != 1) {
		if !e.retire() {
			return fmt.Errorf("key index %d of %s is already open with a different PIN (from %s); both keys of an index share one PIN", cfg.Index, cfg.Library, e.source)
		}
		// The device refused the PIN of the keys open at the index, so
		// none of them can serve: this one (a reload with the corrected
		// PIN) replaces it for all of them.
		// The keys still open at the index keep their checks.
		e.mu.Lock()
		pubs = e.pubs
		e.mu.Unlock()
		e, refs = nil, e.refs
	}
	if e == nil {
		e = &pinEntry{pin: append([]byte(nil), cfg.PIN...), source: cfg.PINSource, refs: refs, pubs: pubs}
		if cfg.PIN == nil {
			e.pin = nil
		}
		d.pins[cfg.Index] = e
	}
	e.refs++
	return nil
}

// retire wipes and closes an entry whose PIN the device refused, and
// reports whether it did.
func (e *pinEntry) retire() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rejected == nil {
		return false
	}
	clear(e.pin)
	e.closed = true
	return true
}

// setPublic records the public key a key at index exported when it
// opened, for the checks of later sessions.
func (d *device) setPublic(index uint32, u Usage, pub *ecdsa.PublicKey) {
	if e := d.entry(index); e != nil {
		e.mu.Lock()
		e.pubs[u] = pub
		e.mu.Unlock()
	}
}

func (d *device) dropPIN(index uint32) {
	d.keysMu.Lock()
	defer d.keysMu.Unlock()
	e := d.pins[index]
	if e == nil {
		return
	}
	if e.refs--; e.refs == 0 {
		delete(d.pins, index)
		e.mu.Lock()
		clear(e.pin)
		e.closed = true
		e.mu.Unlock()
	}
}

// entry returns the PIN entry of the keys open at an index, nil for
// none.
func (d *device) entry(index uint32) *pinEntry {
	d.keysMu.Lock()
	defer d.keysMu.Unlock()
	return d.pins[index]
}

// authorise obtains the access right to a key index for a session with
// the PIN of e, the index's entry, and reports whether
// SDF_ReleasePrivateKeyAccessRight is owed for it; without a PIN there is
// nothing to obtain. The PIN is offered by one session at a time and not
// at all once the device refused it, by this entry or an earlier one.
func (d *device) authorise(sess uintptr, index uint32, e *pinEntry) (owed bool, err error) {
	if e == nil {
		return false, fmt.Errorf("key index %d is not open", index)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.rejected != nil:
		return false, e.rejected
	case e.closed:
		return false, fmt.Errorf("key index %d is not open", index)
	case e.pin == nil:
		return false, nil
	}
	// The record is kept by the library's real path (the registry's key),
	// so that another spelling of its path finds it.
	if err := refusedBefore(d.regKey, index, e.pin); err != nil {
		e.rejected = &accessError{index: index, source: e.source, err: err}
		return false, e.rejected
	}
	if err := d.lib.getAccessRight(sess, index, e.pin); err != nil {
		var se *Error
		if errors.As(err, &se) && se.sessionFatal() {
			return false, err
		}
		if se == nil || se.Code != sdrKeyNotExist {
			remember(d.regKey, index, e.pin, err)
		}
		e.rejected = &accessError{index: index, source: e.source, err: err}
		return false, e.rejected
	}
	return true, nil
}

// checkKeys checks, on a session that has just obtained the access right
// to index, that the device holds there the keys that were open at the
// index when they were checked against their certificates: a device reset
// or a failover to another device with other keys at the index would
// otherwise make handshakes fail with signatures that do not verify and
// pre-master secrets that do not decrypt, and nothing would say why.
func (d *device) checkKeys(sess uintptr, index uint32, e *pinEntry) error {
	e.mu.Lock()
	pubs := e.pubs
	e.mu.Unlock()
	for u, want := range pubs {
		if want == nil {
			continue
		}
		buf := make([]byte, pubBufLen)
		if err := d.lib.exportPublicKey(sess, Usage(u), index, buf); err != nil {
			return err
		}
		got, err := d.profile.decodePublicKey(buf)
		if err != nil {
			return fmt.Errorf("exporting the %s public key of index %d again: %w", Usage(u), index, err)
		}
		if !got.Equal(want) {
			return &keyChangedError{lib: d.lib.path(), index: index, usage: Usage(u)}
		}
	}
	return nil
}

// keyChangedError says that the device no longer holds the key that was
// checked against the certificate when the key was opened.
type keyChangedError struct {
	lib   string
	index uint32
	usage Usage
}

func (e *keyChangedError) Error() string {
	return fmt.Sprintf("the device of %s now holds another %s key at index %d than the one checked against its certificate when it was opened (a device replaced, reinitialised or failed over to one with other keys); it is not used: put the key back at index %d, or restart gmgate with certificates for the device's keys", e.lib, e.usage, e.index, e.index)
}

// accessError is a refused SDF_GetPrivateKeyAccessRight.
type accessError struct {
	index  uint32
	source string
	err    error
}

func (e *accessError) Error() string {
	var se *Error
	if errors.As(e.err, &se) && se.Code == sdrKeyNotExist {
		return fmt.Sprintf("there is no key at index %d on the device (%v); check index=", e.index, e.err)
	}
	return fmt.Sprintf("the device refused the PIN from %s for key index %d (%v); check the PIN. No further attempts are made with it, because cards lock a key after repeated failures", e.source, e.index, e.err)
}

func (e *accessError) Unwrap() error { return e.err }

// newDevice returns the device of cfg's library, registered as key, to
// be opened.
func newDevice(cfg Config, obs Observer, key string) *device {
	return &device{
		regKey:     key,
		profile:    cfg.Profile,
		sessions:   cfg.Sessions,
		lockThread: cfg.LockThread,
		obs:        obs,
		pins:       map[uint32]*pinEntry{},
		opened:     make(chan struct{}),
		closed:     make(chan struct{}),
		reqs:       make(chan *request),
		quit:       make(chan struct{}),
	}
}

// open opens the device and tells those waiting; a device that fails to
// open leaves the registry, so that the next open tries afresh.
func (d *device) open(cfg Config) {
	err := d.openSessions(cfg)
	devices.Lock()
	defer devices.Unlock()
	if err != nil {
		delete(devices.m, d.regKey)
		d.openErr = err
	}
	close(d.opened)
}

// openSessions loads the library, opens the device and its sessions.
func (d *device) openSessions(cfg Config) error {
	lib, err := loadLibrary(cfg.Library)
	if err != nil {
		return err
	}
	d.lib = lib
	if d.handle, err = lib.openDevice(); err != nil {
		return fmt.Errorf("cannot open the device of SDF library %s: %w", cfg.Library, err)
	}
	d.isOpen = true
	ready := make(chan error, d.sessions)
	d.wg.Add(d.sessions)
	for range d.sessions {
		w := &worker{d: d}
		d.workers = append(d.workers, w)
		go w.run(ready)
	}
	opened, firstErr := 0, error(nil)
	for range d.sessions {
		if err := <-ready; err == nil {
			opened++
		} else if firstErr == nil {
			firstErr = err
		}
	}
	if opened == 0 {
		d.stop()
		return fmt.Errorf("cannot open a session on the device of SDF library %s: %w", cfg.Library, firstErr)
	}
	if opened < d.sessions {
		d.stop()
		return fmt.Errorf("SDF library %s opened only %d of the %d sessions asked for: %w; lower sessions= to what the card's licence allows", cfg.Library, opened, d.sessions, firstErr)
	}
	return nil
}

// shutdown stops the device and then takes it out of the devices still
// closing.
func (d *device) shutdown() {
	d.stop()
	devices.Lock()
	if devices.closing[d.regKey] == d {
		delete(devices.closing, d.regKey)
	}
	devices.Unlock()
	close(d.closed)
}

// stop stops the workers, which close their sessions, then closes the
// device. It waits for calls in progress to return.
func (d *device) stop() {
	close(d.quit)
	d.wg.Wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.isOpen {
		_ = d.lib.closeDevice(d.handle)
		d.isOpen = false
		d.gen++
	}
	d.keysMu.Lock()
	for i, e := range d.pins {
		clear(e.pin)
		delete(d.pins, i)
	}
	d.keysMu.Unlock()
}

// reopen closes and reopens the device handle after a device-level
// failure, down. A device that opens but still gives no session is not
// reopened again before reopenHoldoff has passed either.
func (d *device) reopen(down *deviceDown) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.gen != down.gen && d.isOpen {
		return nil // another worker reopened it already
	}
	if time.Since(d.lastTry) < reopenHoldoff {
		cause := d.lastErr
		if d.isOpen {
			cause = down.err
		}
		return fmt.Errorf("the device of %s is unavailable: %w", d.lib.path(), cause)
	}
	d.lastTry = time.Now()
	if d.isOpen {
		_ = d.lib.closeDevice(d.handle)
		d.isOpen = false
		d.gen++
	}
	h, err := d.lib.openDevice()
	if err != nil {
		d.lastErr = err
		return fmt.Errorf("the device of %s is unavailable: reopening it: %w", d.lib.path(), err)
	}
	d.handle, d.isOpen = h, true
	return nil
}

// deviceDown says that the device handle must be reopened before a
// session can be had.
type deviceDown struct {
	gen uint64
	err error
}

func (e *deviceDown) Error() string {
	if e.err == nil {
		return "device unavailable"
	}
	return "device unavailable: " + e.err.Error()
}
func (e *deviceDown) Unwrap() error { return e.err }

// do runs op on a session, within ctx: waiting for a free session and the
// call itself both count.
func (d *device) do(ctx context.Context, index uint32, op func(l library, sess uintptr) error) error {
	req := &request{index: index, op: op, done: make(chan error, 1)}
	start := time.Now()
	select {
	case d.reqs <- req:
		d.obs.PoolWait(backendName, time.Since(start))
	case <-ctx.Done():
		waited := time.Since(start)
		d.obs.PoolWait(backendName, waited)
		return fmt.Errorf("%w after waiting %v: all %d sessions on %s stayed busy; raise sessions= if the card's licence allows, or timeout=", ErrPoolExhausted, waited.Round(time.Millisecond), d.sessions, d.lib.path())
	case <-d.quit:
		return ErrClosed
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: the SDF library %s did not answer within %v; the session stays busy until it does", ErrTimeout, d.lib.path(), time.Since(start).Round(time.Millisecond))
	}
}

// run owns one session and serves requests on it until the device is
// shut down. The first value sent on ready says whether its session opened.
func (w *worker) run(ready chan<- error) {
	d := w.d
	defer d.wg.Done()
	if d.lockThread {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	defer w.close()
	ready <- w.openSession()
	for {
		select {
		case <-d.quit:
			return
		case req := <-d.reqs:
			d.obs.PoolInUse(backendName, 1)
			w.since.Store(time.Now().UnixNano())
			err := w.serve(req)
			w.since.Store(0)
			d.obs.PoolInUse(backendName, -1)
			req.done <- err
		}
	}
}

type worker struct {
	d *device
	// since is when the request being served started (UnixNano), 0
	// between requests.
	since atomic.Int64
	sess  uintptr
	gen   uint64
	has   bool
	// rights holds the indexes the session may use.
	rights map[uint32]right
}

// right is a session's access right to a key index.
type right struct {
	// entry is the PIN entry the right was obtained for: when the keys of
	// the index all closed and a key opened there again, with a PIN of
	// its own, the right is obtained again with that PIN.
	entry *pinEntry
	// owed says whether SDF_ReleasePrivateKeyAccessRight is owed.
	owed bool
}

func (w *worker) openSession() error {
	w.d.mu.RLock()
	defer w.d.mu.RUnlock()
	return w.ensureSession()
}

// ensureSession opens the worker's session if it has none or has one from
// a device handle since closed; with d.mu held for reading.
func (w *worker) ensureSession() error {
	d := w.d
	if !d.isOpen {
		return &deviceDown{gen: d.gen, err: d.lastErr}
	}
	if w.has && w.gen == d.gen {
		return nil
	}
	w.has = false // a session of a closed handle is gone with it
	s, err := d.lib.openSession(d.handle)
	if err != nil {
		var se *Error
		if errors.As(err, &se) && se.deviceFatal() {
			return &deviceDown{gen: d.gen, err: err}
		}
		return err
	}
	w.sess, w.gen, w.has = s, d.gen, true
	w.rights = map[uint32]right{}
	return nil
}

// serve runs a request, reopening what failed: a session that died is
// replaced once, a device whose handle died is reopened, and an access
// right the device dropped is acquired again. Errors of the operation
// itself are returned as they are.
func (w *worker) serve(req *request) error {
	for try := 0; ; try++ {
		err := w.attempt(req)
		if err == nil || try == 2 {
			return err
		}
		var down *deviceDown
		var se *Error
		var ae *accessError
		switch {
		case errors.As(err, &down):
			if rerr := w.d.reopen(down); rerr != nil {
				return rerr
			}
		case errors.As(err, &ae):
			return err
		case errors.As(err, &se) && se.sessionFatal():
			w.drop()
		case errors.As(err, &se) && se.unauthorised() && w.rights[req.index].owed:
			// The device dropped the right it granted: acquire it again.
			delete(w.rights, req.index)
		default:
			return err
		}
	}
}

func (w *worker) attempt(req *request) error {
	d := w.d
	d.mu.RLock()
	defer d.mu.RUnlock()
	if err := w.ensureSession(); err != nil {
		return err
	}
	e := d.entry(req.index)
	if r, ok := w.rights[req.index]; !ok || r.entry != e {
		owed, err := d.authorise(w.sess, req.index, e)
		if err != nil {
			return err
		}
		if err := d.checkKeys(w.sess, req.index, e); err != nil {
			if owed {
				_ = d.lib.releaseAccessRight(w.sess, req.index)
			}
			return err
		}
		w.rights[req.index] = right{entry: e, owed: owed}
	}
	return req.op(d.lib, w.sess)
}

// drop closes the worker's session after a failure (best effort: the
// session may be gone already).
func (w *worker) drop() {
	d := w.d
	d.mu.RLock()
	defer d.mu.RUnlock()
	if w.has && w.gen == d.gen && d.isOpen {
		_ = d.lib.closeSession(w.sess)
	}
	w.has = false
}

// close releases the access rights and closes the session, when the device
// shuts down.
func (w *worker) close() {
	d := w.d
	d.mu.RLock()
	defer d.mu.RUnlock()
	if !w.has || w.gen != d.gen || !d.isOpen {
		return
	}
	for index, r := range w.rights {
		if r.owed {
			_ = d.lib.releaseAccessRight(w.sess, index)
		}
	}
	_ = d.lib.closeSession(w.sess)
	w.has = false
}
