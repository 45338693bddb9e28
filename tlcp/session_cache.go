package tlcp

import (
	"sync"
	"time"
)

// sessionKey is a session ID as a map key: its length, then its bytes.
type sessionKey [1 + 32]byte

func makeSessionKey(id []byte) (sessionKey, bool) {
	var k sessionKey
	if len(id) == 0 || len(id) > 32 {
		return k, false
	}
	k[0] = byte(len(id))
	copy(k[1:], id)
	return k, true
}

// sessionSlot is one cached session. It holds no pointer, so that a cache
// of tens of thousands of sessions is not scanned by the garbage collector
// on every cycle: what has pointers (client certificates, server name) is
// kept aside, for the sessions that have it.
type sessionSlot struct {
	key        sessionKey
	master     [masterSecretLength]byte
	binding    [sessionBindingSize]byte
	version    uint16
	suite      uint16
	created    int64 // Unix nanoseconds
	expires    int64 // Unix nanoseconds; 0 for no limit
	prev, next int32 // LRU list, most recent at head; -1 ends it
	hasExtras  bool
	verified   bool
}

// sessionExtras is the part of a session that holds pointers.
type sessionExtras struct {
	// peerCertificates share one buffer of their exact size.
	peerCertificates [][]byte
	serverName       string
	chains           []sessionChain
}

// compactCertificates copies certs into one buffer of their total size,
// so that a cached session holds nothing of the message they came in.
func compactCertificates(certs [][]byte) [][]byte {
	n := 0
	for _, c := range certs {
		n += len(c)
	}
	buf := make([]byte, 0, n)
	out := make([][]byte, len(certs))
	for i, c := range certs {
		buf = append(buf, c...)
		out[i] = buf[len(buf)-len(c) : len(buf) : len(buf)]
	}
	return out
}

// lruSessionCache is the default server SessionCache: at most capacity
// sessions, least recently used evicted first, each for at most lifetime.
type lruSessionCache struct {
	mu       sync.Mutex
	lifetime time.Duration
	now      func() time.Time
	index    map[sessionKey]int32
	capacity int
	// slots are made by the first Put: the default cache of a Config that
	// only ever serves as a client's (or a clone's) stores nothing.
	slots  []sessionSlot
	extras map[int32]*sessionExtras
	head   int32
	tail   int32
	// free lists unused slots through next.
	free int32
}

// NewLRUSessionCache returns a server SessionCache holding at most capacity
// sessions (DefaultSessionCacheSize when capacity <= 0) for at most
// lifetime each (no limit when lifetime <= 0), evicting the least recently
// used.
func NewLRUSessionCache(capacity int, lifetime time.Duration) SessionCache {
	if capacity <= 0 {
		capacity = DefaultSessionCacheSize
	}
	return &lruSessionCache{
		lifetime: lifetime,
		now:      time.Now,
		index:    make(map[sessionKey]int32),
		capacity: capacity,
		extras:   make(map[int32]*sessionExtras),
		head:     -1,
		tail:     -1,
		free:     -1,
	}
}

// makeSlots makes the slots, all free.
func (c *lruSessionCache) makeSlots() {
	c.slots = make([]sessionSlot, c.capacity)
	for i := range c.slots {
		c.slots[i].next = int32(i + 1)
	}
	c.slots[c.capacity-1].next = -1
	c.free = 0
}

func (c *lruSessionCache) unlink(i int32) {
	s := &c.slots[i]
	if s.prev >= 0 {
		c.slots[s.prev].next = s.next
	} else {
		c.head = s.next
	}
	if s.next >= 0 {
		c.slots[s.next].prev = s.prev
	} else {
		c.tail = s.prev
	}
}

func (c *lruSessionCache) pushFront(i int32) {
	s := &c.slots[i]
	s.prev, s.next = -1, c.head
	if c.head >= 0 {
		c.slots[c.head].prev = i
	}
	c.head = i
	if c.tail < 0 {
		c.tail = i
	}
}

// drop removes slot i and puts it on the free list.
func (c *lruSessionCache) drop(i int32) {
	c.unlink(i)
	s := &c.slots[i]
	delete(c.index, s.key)
	if s.hasExtras {
		delete(c.extras, i)
	}
	clear(s.master[:])
	*s = sessionSlot{next: c.free}
	c.free = i
}

func (c *lruSessionCache) Get(id []byte) (*SessionState, bool) {
	k, ok := makeSessionKey(id)
	if !ok {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.index[k]
	if !ok {
		return nil, false
	}
	s := &c.slots[i]
	if s.expires != 0 && c.now().UnixNano() > s.expires {
		c.drop(i)
		return nil, false
	}
	c.unlink(i)
	c.pushFront(i)
	// The state and its copy of the master secret in one allocation.
	found := &struct {
		st     SessionState
		master [masterSecretLength]byte
	}{master: s.master}
	st := &found.st
	*st = SessionState{
		Version:      s.version,
		CipherSuite:  s.suite,
		MasterSecret: found.master[:],
		CreatedAt:    time.Unix(0, s.created),
		binding:      s.binding,
		verified:     s.verified,
	}
	if s.hasExtras {
		x := c.extras[i]
		st.PeerCertificates = x.peerCertificates
		st.ServerName = x.serverName
		st.chains = x.chains
	}
	return st, true
}

// Put keeps a copy of st. A state with more client certificate bytes
// than a session may keep is not stored.
func (c *lruSessionCache) Put(id []byte, st *SessionState) {
	k, ok := makeSessionKey(id)
	if !ok || st == nil || len(st.MasterSecret) != masterSecretLength || !sessionCertsFit(st.PeerCertificates) {
		return
	}
	var x *sessionExtras
	if len(st.PeerCertificates) > 0 || st.ServerName != "" {
		// Copied before taking the lock.
		x = &sessionExtras{serverName: st.ServerName, chains: st.chains}
		if len(st.PeerCertificates) > 0 {
			x.peerCertificates = compactCertificates(st.PeerCertificates)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.slots == nil {
		c.makeSlots()
	}
	if i, ok := c.index[k]; ok {
		c.drop(i)
	}
	if c.free < 0 {
		c.drop(c.tail)
	}
	i := c.free
	c.free = c.slots[i].next
	s := &c.slots[i]
	*s = sessionSlot{key: k, binding: st.binding, version: st.Version, suite: st.CipherSuite, created: st.CreatedAt.UnixNano(), verified: st.verified}
	copy(s.master[:], st.MasterSecret)
	if c.lifetime > 0 {
		s.expires = c.now().Add(c.lifetime).UnixNano()
	}
	if x != nil {
		s.hasExtras = true
		c.extras[i] = x
	}
	c.index[k] = i
	c.pushFront(i)
}

func (c *lruSessionCache) Delete(id []byte) {
	k, ok := makeSessionKey(id)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if i, ok := c.index[k]; ok {
		c.drop(i)
	}
}

// len returns the number of cached sessions (for tests).
func (c *lruSessionCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.index)
}
