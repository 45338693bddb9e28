package upstream

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gmgate/gmgate/tlcp"
)

// connSet is the connections that carry a tlcp:// pool's HTTP routes,
// all made with one client identity: an HTTP/1.1 transport, with http2 an
// HTTP/2 one, and the connections one of them made for the other (see
// tlcpHTTP2). A target learns who the client is at the handshake only,
// so when the identity in service changes (a reload, a rotated file seen
// by the watcher) the pool's requests move to a new set, whose
// connections present the new identity from the next request on, and the
// old set is retired: its idle connections close at once, and the others
// once the requests they carry are done (their response read, an
// upgraded connection closed), as Envoy drains a pool on a secret update.
// A request is never sent on a retired set's connections unless it began
// before the change; HTTP/2 opens no new stream on them.
type connSet struct {
	// identity is the tag of the identity the set was made for.
	identity string
	http     *http.Transport
	h2       *http.Transport // nil without http2

	// users counts the requests using the set, and one more while it is
	// in service; the last to leave closes its connections.
	users   atomic.Int64
	retired atomic.Bool

	mu sync.Mutex
	// conns are the connections handed to the transports, spares those
	// made for the other version.
	conns  map[*setConn]struct{}
	spares map[spareKey][]spareConn
	closed bool
}

type spareKey struct {
	addr    string
	version int32
}

type spareConn struct {
	conn *tlcp.Conn
	made time.Time
}

// errSetClosed is a dial that completed after its set closed: the
// connection is not kept.
var errSetClosed = errors.New("the connection was made for client certificates no longer in service")

func (tr *tlcpTransport) newConnSet(identity string) *connSet {
	s := &connSet{identity: identity, conns: map[*setConn]struct{}{}, spares: map[spareKey][]spareConn{}}
	s.users.Store(1)
	ts := tr.settings
	s.http = ts.httpTransport()
	// HTTP/1.1 only, with http2 too: the targets that did not choose h2.
	ts.boundConns(s.http)
	if tr.h2 == nil {
		s.http.DialTLSContext = ts.boundWrites(func(ctx context.Context, _, addr string) (net.Conn, error) {
			c, err := tr.dial(ctx, addr)
			if err != nil {
				return nil, err
			}
			return s.track(c)
		})
		return s
	}
	s.http.DialTLSContext = ts.boundWrites(func(ctx context.Context, _, addr string) (net.Conn, error) {
		return tr.h2.dial(ctx, s, addr, versionHTTP1)
	})
	s.h2 = tr.h2.transport(ts, func(ctx context.Context, _, addr string) (net.Conn, error) {
		return tr.h2.dial(ctx, s, addr, versionHTTP2)
	})
	return s
}

// connections returns the set of the identity in service for one
// request, which must release it (holdFor does when the response is
// done). The first request to see a new identity makes its set and
// retires the old one.
func (tr *tlcpTransport) connections() *connSet {
	for {
		s := tr.conns.Load()
		if tag, _ := tr.identityInService(); s.identity == tag && s.Acquire() {
			return s
		}
		if own := tr.renew(s); own != nil {
			return own
		}
	}
}

// renew puts a set for the identity in service in place of old, unless
// another request did already. A closed pool's sets are out of service:
// a request it still gets (a retry begun before a reload) is given a set
// of its own, which closes when the request is done.
func (tr *tlcpTransport) renew(old *connSet) (own *connSet) {
	tr.renewMu.Lock()
	// Read again under the lock: a request that read the identity before
	// a change must not bring the old one back.
	tag, _ := tr.identityInService()
	if tr.closed {
		tr.renewMu.Unlock()
		s := tr.newConnSet(tag)
		s.retired.Store(true)
		return s
	}
	if tr.conns.Load() != old || old.identity == tag && !old.retired.Load() {
		tr.renewMu.Unlock()
		return nil
	}
	tr.conns.Store(tr.newConnSet(tag))
	tr.renewMu.Unlock()
	tr.log.Info("client certificate changed: requests go over new connections, the old ones close when their requests are done")
	old.retire()
	return nil
}

// acquire counts a request in, unless the set has closed.
func (s *connSet) Acquire() bool {
	for {
		n := s.users.Load()
		if n == 0 {
			return false
		}
		if s.users.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release counts a request out; the last one closes a retired set. On a
// retired set the connection the request gave back to its transport is
// closed at once, not kept idle until the last request is done (an
// upgraded connection can keep a set for hours).
func (s *connSet) Release() {
	if s.users.Add(-1) == 0 {
		s.closeAll()
	} else if s.retired.Load() {
		s.CloseIdle()
	}
}

// retire takes the set out of service: idle connections close now, the
// others when their requests are done.
func (s *connSet) retire() {
	if !s.retired.CompareAndSwap(false, true) {
		return
	}
	s.CloseIdle()
	s.Release()
}

// holdFor keeps the set for resp until its body is closed: with the
// transport's connection, for an upgraded connection (101), until that
// closes.
func (s *connSet) holdFor(resp *http.Response) {
	if resp.Body == nil || resp.Body == http.NoBody {
		// The connection went back to its transport with the response.
		s.Release()
		return
	}
	b := &setBody{ReadCloser: resp.Body, set: s}
	if w, ok := resp.Body.(io.Writer); ok {
		resp.Body = &setUpgradedBody{setBody: b, w: w}
		return
	}
	resp.Body = b
}

// setBody is a response body that releases its set when closed.
type setBody struct {
	io.ReadCloser
	set  *connSet
	done atomic.Bool
}

func (b *setBody) Close() error {
	err := b.ReadCloser.Close()
	if b.done.CompareAndSwap(false, true) {
		b.set.Release()
	}
	return err
}

// setUpgradedBody is the body of a 101 response, which ReverseProxy
// writes to as the upgraded connection.
type setUpgradedBody struct {
	*setBody
	w io.Writer
}

func (b *setUpgradedBody) Write(p []byte) (int, error) { return b.w.Write(p) }

// track keeps c among the set's connections, to be closed with it.
func (s *connSet) track(c *tlcp.Conn) (net.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return nil, &stageError{stage: stageConnect, err: errSetClosed}
	}
	sc := &setConn{Conn: c, set: s}
	s.conns[sc] = struct{}{}
	return sc, nil
}

// setConn is a connection of a set.
type setConn struct {
	*tlcp.Conn
	set *connSet
}

func (c *setConn) Close() error {
	c.set.mu.Lock()
	delete(c.set.conns, c)
	c.set.mu.Unlock()
	return c.Conn.Close()
}

// putSpare keeps c, which the target made for version, for the
// transport that speaks it.
func (s *connSet) putSpare(addr string, version int32, c *tlcp.Conn) {
	k := spareKey{addr, version}
	s.mu.Lock()
	if !s.closed && len(s.spares[k]) < maxSpares {
		s.spares[k] = append(s.spares[k], spareConn{conn: c, made: time.Now()})
		c = nil
	}
	s.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// takeSpare returns a connection kept for version, nil when none is
// fresh; stale ones are closed.
func (s *connSet) takeSpare(addr string, version int32) *tlcp.Conn {
	k := spareKey{addr, version}
	s.mu.Lock()
	defer s.mu.Unlock()
	for list := s.spares[k]; len(list) > 0; list = s.spares[k] {
		sp := list[len(list)-1]
		s.spares[k] = list[:len(list)-1]
		if time.Since(sp.made) < spareLifetime {
			return sp.conn
		}
		sp.conn.Close()
	}
	return nil
}

// closeIdle closes the connections no request is using.
func (s *connSet) CloseIdle() {
	s.http.CloseIdleConnections()
	if s.h2 != nil {
		s.h2.CloseIdleConnections()
	}
	s.mu.Lock()
	spares := s.spares
	s.spares = map[spareKey][]spareConn{}
	s.mu.Unlock()
	for _, list := range spares {
		for _, sp := range list {
			sp.conn.Close()
		}
	}
}

// closeAll closes every connection of a set that no request uses any
// more: those the transports keep idle, and an HTTP/2 connection whose
// last stream the transport has yet to forget.
func (s *connSet) closeAll() {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = map[*setConn]struct{}{}
	s.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
	s.CloseIdle()
}
