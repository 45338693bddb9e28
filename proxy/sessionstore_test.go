package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/sessionstore"
	"github.com/gmgate/gmgate/internal/testredis"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/gmgate/gmgate/tlcp"
)

const (
	testSealKey1 = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	testSealKey2 = "f0e0d0c0b0a090807060504030201000ffeeddccbbaa99887766554433221100"
)

// sharedConfig is testConfig with the edge listener's sessions shared
// through the Redis at addr, sealed with the keys in keysFile.
func sharedConfig(p *testPKI, upstream, addr, keysFile string) *config.Config {
	cfg := testConfig(p, upstream)
	// A lookup timeout that a loaded machine running the race detector
	// does not reach: these tests are about what is shared, not how fast.
	cfg.SessionStore = &config.SessionStore{KeysFile: keysFile, Redis: &config.Redis{Addrs: []string{addr}, Timeout: config.Duration(2 * time.Second)}}
	cfg.Listeners[0].SharedSessions = true
	config.Defaults(cfg)
	return cfg
}

func writeKeys(t *testing.T, dir, name string, keys ...string) string {
	t.Helper()
	f := filepath.Join(dir, name)
	if err := os.WriteFile(f, []byte(strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// tlcpResumes makes a TLCP handshake with s through cache and reports
// whether it resumed.
func tlcpResumes(t *testing.T, p *testPKI, s *Server, cache tlcp.ClientSessionCache) bool {
	t.Helper()
	c, err := tlcp.Dial("tcp", s.Addr("edge").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost", ClientSessionCache: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().DidResume
}

// tlsResumes sends a request to s over TLS 1.3 with cache and reports
// whether the handshake resumed (the ticket of the answer is kept).
func tlsResumes(t *testing.T, p *testPKI, s *Server, cache tls.ClientSessionCache) bool {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: p.tlsRoots, ServerName: "localhost", MinVersion: tls.VersionTLS13, ClientSessionCache: cache}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(gatewayURL(s, "/"))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	return resp.TLS.DidResume
}

func TestSharedSessionsAcrossReplicas(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "app").URL
	mr := miniredis.RunT(t)
	dir := tempDir(t)
	keys := writeKeys(t, dir, "keys", testSealKey1)
	s1 := startServer(t, sharedConfig(p, up, mr.Addr(), keys), nil)
	s2 := startServer(t, sharedConfig(p, up, mr.Addr(), keys), nil)

	cache := tlcp.NewLRUClientSessionCache(4, 0)
	if tlcpResumes(t, p, s1, cache) {
		t.Fatal("the first handshake resumed")
	}
	testwait.For(t, "the session in Redis", func() bool { return len(mr.Keys()) == 1 })
	if !tlcpResumes(t, p, s2, cache) {
		t.Fatal("a TLCP session from replica 1 did not resume on replica 2")
	}
	if v, _ := metricValue(scrape(t, s2), "gmgate_session_store_lookups_total", map[string]string{"result": "hit"}); v != 1 {
		t.Fatalf("replica 2 store hits = %v, want 1", v)
	}
	if !tlcpResumes(t, p, s2, cache) {
		t.Fatal("no resumption from replica 2's local cache")
	}
	mf := scrape(t, s2)
	if v, _ := metricValue(mf, "gmgate_session_store_lookups_total", map[string]string{"result": "local"}); v != 1 {
		t.Fatalf("replica 2 local hits = %v, want 1", v)
	}
	if v, _ := metricValue(mf, "gmgate_session_store_up", nil); v != 1 {
		t.Fatalf("gmgate_session_store_up = %v", v)
	}

	// TLS: tickets from one replica resume on the other.
	tcache := tls.NewLRUClientSessionCache(4)
	if tlsResumes(t, p, s1, tcache) {
		t.Fatal("the first TLS handshake resumed")
	}
	if !tlsResumes(t, p, s2, tcache) {
		t.Fatal("a TLS ticket from replica 1 did not resume on replica 2")
	}

	// Key rotation on one replica: the new key first, the old one still
	// listed. What replica 1 sealed with the old key resumes there, for
	// TLCP and TLS alike.
	cache, tcache = tlcp.NewLRUClientSessionCache(4, 0), tls.NewLRUClientSessionCache(4)
	tlcpResumes(t, p, s1, cache)
	tlsResumes(t, p, s1, tcache)
	testwait.For(t, "the second session in Redis", func() bool { return len(mr.Keys()) == 2 })
	rotated := sharedConfig(p, up, mr.Addr(), writeKeys(t, dir, "rotated", testSealKey2, testSealKey1))
	if err := s2.Reload(rotated); err != nil {
		t.Fatal(err)
	}
	if !tlcpResumes(t, p, s2, cache) {
		lookups := map[string]float64{}
		for _, r := range []string{"local", "hit", "miss", "error", "invalid", "unavailable"} {
			lookups[r], _ = metricValue(scrape(t, s2), "gmgate_session_store_lookups_total", map[string]string{"result": r})
		}
		t.Fatalf("a TLCP session sealed with the old key did not resume after the new key was put first; replica 2 lookups %v", lookups)
	}
	if !tlsResumes(t, p, s2, tcache) {
		t.Fatal("a TLS ticket sealed with the old key did not resume after the new key was put first")
	}
}

func TestSharedSessionsOptIn(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "app").URL
	mr := miniredis.RunT(t)
	keys := writeKeys(t, tempDir(t), "keys", testSealKey1)
	s1 := startServer(t, sharedConfig(p, up, mr.Addr(), keys), nil)
	private := sharedConfig(p, up, mr.Addr(), keys)
	private.Listeners[0].SharedSessions = false
	s2 := startServer(t, private, nil)

	cache := tlcp.NewLRUClientSessionCache(4, 0)
	tlcpResumes(t, p, s1, cache)
	testwait.For(t, "the session in Redis", func() bool { return len(mr.Keys()) == 1 })
	if tlcpResumes(t, p, s2, cache) {
		t.Fatal("a listener without shared_sessions resumed a session from Redis")
	}
	tcache := tls.NewLRUClientSessionCache(4)
	tlsResumes(t, p, s1, tcache)
	if tlsResumes(t, p, s2, tcache) {
		t.Fatal("a listener without shared_sessions resumed another replica's ticket")
	}
}

// TestRedisHoldsNoPlaintextMasterSecret makes TLCP sessions of every kind
// (ECC and ECDHE, with and without client certificates) through a
// listener with shared sessions, takes their master secrets from the
// replica's own cache, and scans every value in Redis for them.
func TestRedisHoldsNoPlaintextMasterSecret(t *testing.T) {
	p := getPKI(t)
	mr := miniredis.RunT(t)
	keysFile := writeKeys(t, tempDir(t), "keys", testSealKey1)
	cfg := sharedConfig(p, echoUpstream(t, "app").URL, mr.Addr(), keysFile)
	cfg.Listeners[0].TLCP.ClientAuth = "verify_if_given"
	cfg.Listeners[0].TLCP.ClientCA = p.dual.CACert
	s := startServer(t, cfg, nil)
	pair, err := p.ca.IssueDual(pki.IssueOptions{DNSNames: []string{"client.example"}})
	if err != nil {
		t.Fatal(err)
	}
	client := *pair.Certificate()

	var ids [][]byte
	for _, tc := range []struct {
		suite uint16
		cert  bool
	}{
		{tlcp.ECC_SM4_GCM_SM3, false}, {tlcp.ECC_SM4_CBC_SM3, true},
		{tlcp.ECDHE_SM4_GCM_SM3, true}, {tlcp.ECDHE_SM4_CBC_SM3, true},
	} {
		for range 2 {
			cc := &tlcp.Config{RootCAs: p.roots, ServerName: "localhost", CipherSuites: []uint16{tc.suite}}
			if tc.cert {
				cc.Certificates = []tlcp.Certificate{client}
			}
			c, err := tlcp.Dial("tcp", s.Addr("edge").String(), cc)
			if err != nil {
				t.Fatalf("%s: %v", tlcp.CipherSuiteName(tc.suite), err)
			}
			ids = append(ids, c.ConnectionState().SessionID)
			c.Close()
		}
	}
	testwait.For(t, "every session in Redis", func() bool { return len(mr.Keys()) == len(ids) })

	local := s.sessionCaches["edge"].cache
	keys, err := sessionstore.LoadKeys(keysFile, "")
	if err != nil {
		t.Fatal(err)
	}
	var masters [][]byte
	for _, id := range ids {
		st, ok := local.Get(id)
		if !ok || len(st.MasterSecret) != 48 {
			t.Fatalf("session %x is not in the replica's cache", id)
		}
		masters = append(masters, st.MasterSecret)
		// The scan would see it: opened, the value holds the secret.
		key := "gmgate:tlcp:" + hex.EncodeToString(id)
		v, _ := mr.Get(key)
		plain, err := keys.Open([]byte(v), []byte(key))
		if err != nil || !bytes.Contains(plain, st.MasterSecret) {
			t.Fatalf("%s does not open to its session: %v", key, err)
		}
	}
	for _, k := range mr.Keys() {
		v, err := mr.Get(k)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range masters {
			// Any 8 bytes of a master secret in a row.
			for i := 0; i+8 <= len(m); i += 8 {
				if bytes.Contains([]byte(v), m[i:i+8]) {
					t.Fatalf("%s holds bytes of a master secret in the clear", k)
				}
			}
		}
		if bytes.Contains([]byte(v), pair.SignCert.RawSubject) {
			t.Fatalf("%s holds a client certificate in the clear", k)
		}
	}
}

// TestCheckSessionStore: config check (and serve) read the keys and the
// Redis password and name the field of each problem; a Redis that does
// not answer is a warning, since replicas serve without it.
func TestCheckSessionStore(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "app").URL
	dir := tempDir(t)
	mr := miniredis.RunT(t)

	bad := sharedConfig(p, up, mr.Addr(), filepath.Join(dir, "missing.keys"))
	bad.SessionStore.Redis.PasswordEnv = "GMGATE_TEST_NO_SUCH_VARIABLE"
	_, err := Check(bad, CheckOptions{})
	if err == nil {
		t.Fatal("a missing keys file and password variable passed the check")
	}
	for _, want := range []string{"session_store.keys_file", "missing.keys", "GMGATE_TEST_NO_SUCH_VARIABLE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the check does not say %q:\n%v", want, err)
		}
	}
	if _, err := New(bad, Options{Logger: testLogger(t)}); err == nil || !strings.Contains(err.Error(), "session_store.keys_file") {
		t.Errorf("serve started with the problem check reports: %v", err)
	}
	if res, err := Check(bad, CheckOptions{Offline: true}); err != nil {
		t.Errorf("an offline check read the secrets: %v (%v)", err, res)
	}

	// The Sentinels' password is read as the master's is.
	sentinel := sharedConfig(p, up, mr.Addr(), writeKeys(t, dir, "good.keys", testSealKey1))
	sentinel.SessionStore.Redis.MasterName = "mymaster"
	sentinel.SessionStore.Redis.SentinelPasswordEnv = "GMGATE_TEST_NO_SUCH_SENTINEL_VARIABLE"
	if _, err := Check(sentinel, CheckOptions{}); err == nil || !strings.Contains(err.Error(), "sentinel_password_env: environment variable GMGATE_TEST_NO_SUCH_SENTINEL_VARIABLE is not set") {
		t.Errorf("a missing Sentinel password variable: %v", err)
	}

	short := writeKeys(t, dir, "short.keys", testSealKey1[:40])
	if _, err := Check(sharedConfig(p, up, mr.Addr(), short), CheckOptions{}); err == nil || strings.Contains(err.Error(), testSealKey1[:16]) || !strings.Contains(err.Error(), "openssl rand -hex 32") {
		t.Errorf("a short key: %v", err)
	}

	keys := writeKeys(t, dir, "keys", testSealKey1)
	storeWarnings := func(res *CheckResult) []string {
		var out []string
		for _, w := range res.Warnings {
			if strings.HasPrefix(w.Path, "session_store") {
				out = append(out, w.String())
			}
		}
		return out
	}
	res, err := Check(sharedConfig(p, up, mr.Addr(), keys), CheckOptions{})
	if err != nil || len(storeWarnings(res)) != 0 {
		t.Fatalf("a good session store: %v, warnings %v", err, res.Warnings)
	}
	addr := mr.Addr()
	mr.Close()
	res, err = Check(sharedConfig(p, up, addr, keys), CheckOptions{})
	if w := storeWarnings(res); err != nil || len(w) != 1 || !strings.Contains(w[0], "session_store.redis.addrs: Redis does not answer") {
		t.Fatalf("Redis down: %v, warnings %v", err, res.Warnings)
	}
}

// TestCheckSessionStoreWrites: a Redis that answers PING and still refuses
// every session gets a warning from the check that names the field, the
// cause and the fix, and leaves no key behind: a user without write
// rights, a read-only replica, a Redis out of memory.
func TestCheckSessionStoreWrites(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "app").URL
	keys := writeKeys(t, tempDir(t), "keys", testSealKey1)
	rs := testredis.Start(t)
	admin := rs.Client()
	defer admin.Close()
	ctx := context.Background()
	do := func(args ...any) {
		t.Helper()
		if err := admin.Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	warning := func(cfg *config.Config) string {
		t.Helper()
		res, err := Check(cfg, CheckOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, w := range res.Warnings {
			if strings.HasPrefix(w.Path, "session_store") {
				out = append(out, w.String())
			}
		}
		if len(out) > 1 {
			t.Fatalf("more than one warning: %v", out)
		}
		if n := admin.DBSize(ctx).Val(); n != 0 {
			t.Fatalf("the check left %d keys in Redis", n)
		}
		return strings.Join(out, "")
	}

	if w := warning(sharedConfig(p, up, rs.Addr(), keys)); w != "" {
		t.Fatalf("a Redis that takes sessions: %s", w)
	}

	do("ACL", "SETUSER", "reader", "on", ">reader-pw", "~*", "+@read", "+@connection")
	reader := sharedConfig(p, up, rs.Addr(), keys)
	reader.SessionStore.Redis.Username = "reader"
	reader.SessionStore.Redis.PasswordEnv = "GMGATE_TEST_READER_PW"
	t.Setenv("GMGATE_TEST_READER_PW", "reader-pw")
	w := warning(reader)
	for _, want := range []string{"session_store.redis.username", `user "reader"`, "NOPERM", "ACL SETUSER reader ~gmgate:* +@read +@write"} {
		if !strings.Contains(w, want) {
			t.Errorf("a user without writes: the warning does not say %q:\n%s", want, w)
		}
	}
	if strings.Contains(w, "reader-pw") {
		t.Errorf("the warning shows the password:\n%s", w)
	}

	do("CONFIG", "SET", "maxmemory-policy", "noeviction")
	do("CONFIG", "SET", "maxmemory", "1")
	w = warning(sharedConfig(p, up, rs.Addr(), keys))
	if !strings.Contains(w, "session_store.redis.addrs: Redis is out of memory") || !strings.Contains(w, "volatile-ttl") {
		t.Errorf("a Redis out of memory: %s", w)
	}
	do("CONFIG", "SET", "maxmemory", "0")

	master := testredis.Start(t)
	host, port, _ := strings.Cut(master.Addr(), ":")
	do("REPLICAOF", host, port)
	w = warning(sharedConfig(p, up, rs.Addr(), keys))
	if !strings.Contains(w, "session_store.redis.addrs: the Redis at "+rs.Addr()+" is a read-only replica") || !strings.Contains(w, "master_name") {
		t.Errorf("a replica: %s", w)
	}
	do("REPLICAOF", "NO", "ONE")
	if w := warning(sharedConfig(p, up, rs.Addr(), keys)); w != "" {
		t.Fatalf("the same Redis once a master again: %s", w)
	}
}

// TestReloadKeepsTheStore: a reload that changes neither session_store nor
// the keys keeps the store and its connections.
func TestReloadKeepsTheStore(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "app").URL
	mr := miniredis.RunT(t)
	keys := writeKeys(t, tempDir(t), "keys", testSealKey1)
	s := startServer(t, sharedConfig(p, up, mr.Addr(), keys), nil)
	before := s.current().shared
	if err := s.Reload(sharedConfig(p, up, mr.Addr(), keys)); err != nil {
		t.Fatal(err)
	}
	if s.current().shared != before {
		t.Fatal("an unchanged session store was rebuilt")
	}
	changed := sharedConfig(p, up, mr.Addr(), keys)
	changed.SessionStore.Redis.KeyPrefix = "tier2:"
	if err := s.Reload(changed); err != nil {
		t.Fatal(err)
	}
	if s.current().shared == before {
		t.Fatal("a changed session store was kept")
	}
}

// TestCheckSharedACME: config check reads the ca_root of a tls.acme
// section kept in the session store, as serve does, and does not ask for
// a state directory that it does not use.
func TestCheckSharedACME(t *testing.T) {
	p := getPKI(t)
	up := echoUpstream(t, "app").URL
	dir := tempDir(t)
	mr := miniredis.RunT(t)
	cfg := sharedConfig(p, up, mr.Addr(), writeKeys(t, dir, "keys", testSealKey1))
	cfg.StateDir = filepath.Join(dir, "not-a-directory")
	if err := os.WriteFile(cfg.StateDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Listeners[0].TLS = &config.TLS{ACME: &config.ACME{Domains: []string{"www.example.cn"}, CA: "https://127.0.0.1:1/directory", CARoot: filepath.Join(dir, "missing.pem"), Shared: true}}
	config.Defaults(cfg)
	_, err := New(cfg, Options{Logger: testLogger(t)})
	if err == nil || !strings.Contains(err.Error(), "tls.acme.ca_root") || strings.Contains(err.Error(), "state_dir") {
		t.Fatalf("serve: %v; want the ca_root problem alone", err)
	}
	for _, offline := range []bool{false, true} {
		if _, err := Check(cfg, CheckOptions{Offline: offline}); err == nil || !strings.Contains(err.Error(), "tls.acme.ca_root") || strings.Contains(err.Error(), "state_dir") {
			t.Errorf("check (offline %v): %v; want the ca_root problem that serve reports, alone", offline, err)
		}
	}
}
