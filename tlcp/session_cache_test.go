package tlcp

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"
)

func testSession(b byte) *SessionState {
	return &SessionState{Version: VersionTLCP, CipherSuite: ECC_SM4_GCM_SM3, MasterSecret: bytes.Repeat([]byte{b}, 48), CreatedAt: time.Unix(1700000000, 0)}
}

func TestLRUSessionCache(t *testing.T) {
	c := NewLRUSessionCache(3, 0).(*lruSessionCache)
	id := func(i int) []byte { return []byte(fmt.Sprintf("session-%02d", i)) }
	for i := 1; i <= 3; i++ {
		c.Put(id(i), testSession(byte(i)))
	}
	// Touch 1 so that 2 is the least recently used, then add 4.
	if s, ok := c.Get(id(1)); !ok || s.MasterSecret[0] != 1 || !s.CreatedAt.Equal(time.Unix(1700000000, 0)) {
		t.Fatalf("Get(1) = %+v, %v", s, ok)
	}
	c.Put(id(4), testSession(4))
	if _, ok := c.Get(id(2)); ok {
		t.Fatal("least recently used session 2 was not evicted")
	}
	for _, i := range []int{1, 3, 4} {
		if s, ok := c.Get(id(i)); !ok || s.MasterSecret[0] != byte(i) {
			t.Fatalf("session %d lost", i)
		}
	}
	if c.len() != 3 {
		t.Fatalf("len %d", c.len())
	}
	// Replacing keeps one entry; Delete removes it.
	c.Put(id(3), testSession(33))
	if s, _ := c.Get(id(3)); s.MasterSecret[0] != 33 || c.len() != 3 {
		t.Fatal("replace failed")
	}
	c.Delete(id(3))
	if _, ok := c.Get(id(3)); ok || c.len() != 2 {
		t.Fatal("delete failed")
	}
	// The state handed out is a copy: changing it changes nothing cached.
	s, _ := c.Get(id(1))
	s.MasterSecret[0] = 99
	if s2, _ := c.Get(id(1)); s2.MasterSecret[0] != 1 {
		t.Fatal("cached master secret changed through a returned state")
	}
	// Client certificates and the server name are kept.
	withCerts := testSession(5)
	withCerts.PeerCertificates = [][]byte{{1, 2}, {3}}
	withCerts.ServerName = "a.test"
	c.Put(id(5), withCerts)
	if s, ok := c.Get(id(5)); !ok || len(s.PeerCertificates) != 2 || s.ServerName != "a.test" {
		t.Fatalf("extras lost: %+v", s)
	}
	// Invalid IDs and states are ignored.
	c.Put(nil, testSession(6))
	c.Put(make([]byte, 33), testSession(6))
	c.Put(id(7), &SessionState{MasterSecret: []byte{1}})
	if _, ok := c.Get(id(7)); ok || c.len() != 3 {
		t.Fatal("invalid session stored")
	}
}

func TestLRUSessionCacheLifetime(t *testing.T) {
	c := NewLRUSessionCache(4, time.Minute).(*lruSessionCache)
	now := time.Unix(1700000000, 0)
	c.now = func() time.Time { return now }
	c.Put([]byte("x"), testSession(1))
	now = now.Add(59 * time.Second)
	if _, ok := c.Get([]byte("x")); !ok {
		t.Fatal("session expired early")
	}
	now = now.Add(2 * time.Second)
	if _, ok := c.Get([]byte("x")); ok || c.len() != 0 {
		t.Fatal("expired session returned")
	}
}

func TestLRUSessionCacheConcurrent(t *testing.T) {
	c := NewLRUSessionCache(64, time.Hour)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				id := []byte(fmt.Sprintf("%d-%d", g, i%100))
				c.Put(id, testSession(byte(i)))
				if s, ok := c.Get(id); ok && len(s.MasterSecret) != 48 {
					t.Error("bad session")
				}
				if i%7 == 0 {
					c.Delete(id)
				}
			}
		}(g)
	}
	wg.Wait()
	if n := c.(*lruSessionCache).len(); n > 64 {
		t.Fatalf("cache holds %d sessions, capacity 64", n)
	}
}

func BenchmarkLRUSessionCachePut(b *testing.B) {
	c := NewLRUSessionCache(DefaultSessionCacheSize, DefaultSessionLifetime)
	s := testSession(1)
	id := make([]byte, 32)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		id[0], id[1], id[2] = byte(i), byte(i>>8), byte(i>>16)
		c.Put(id, s)
	}
}
