package main

// Several gmgate serve processes sharing sessions through Redis, end to
// end: one Redis, a hung one, a full one, a Redis Cluster, Sentinel and
// TLS. The file is longer than most because the scenarios share one
// harness (replicas, Redis instances, a handshaking client) that is read
// best beside them; each scenario is one test function.

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/internal/testredis"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/redis/go-redis/v9"
)

// replicaPKI is what the replicas and the clients share.
type replicaPKI struct {
	files pki.DualFiles // server pair, and CACert
	// caBundle holds CACert and another CA: as client_ca, it verifies the
	// same clients under other subjects.
	caBundle string
	// otherCA is the other CA alone: a CA of the same subject as
	// CACert's, with another key.
	otherCA  string
	client   tlcp.Certificate
	roots    *smx509.CertPool
	tlsCert  string
	tlsKey   string
	tlsRoots *x509.CertPool
	keys     string
}

func newReplicaPKI(t testing.TB, dir string) *replicaPKI {
	t.Helper()
	p := &replicaPKI{}
	ca, err := pki.NewCA(pki.CAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.IssueDual(pki.IssueOptions{DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	if p.files, err = pair.Write(dir, "localhost", nil); err != nil {
		t.Fatal(err)
	}
	client, err := ca.IssueDual(pki.IssueOptions{DNSNames: []string{"client.example"}})
	if err != nil {
		t.Fatal(err)
	}
	p.client = *client.Certificate()
	other, err := pki.NewCA(pki.CAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	otherDir := filepath.Join(dir, "other")
	if err := other.Write(otherDir, nil); err != nil {
		t.Fatal(err)
	}
	ours, err := os.ReadFile(p.files.CACert)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := os.ReadFile(filepath.Join(otherDir, pki.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	p.otherCA = filepath.Join(otherDir, pki.CACertFile)
	p.caBundle = filepath.Join(dir, "ca-bundle.crt")
	if err := os.WriteFile(p.caBundle, append(ours, theirs...), 0o644); err != nil {
		t.Fatal(err)
	}
	p.roots = smx509.NewCertPool()
	p.roots.AppendCertsFromPEM(ours)
	p.tlsCert, p.tlsKey = writeRSACert(t, dir, "localhost")
	pem, err := os.ReadFile(p.tlsCert)
	if err != nil {
		t.Fatal(err)
	}
	p.tlsRoots = x509.NewCertPool()
	p.tlsRoots.AppendCertsFromPEM(pem)
	p.keys = filepath.Join(dir, "session.keys")
	if err := os.WriteFile(p.keys, []byte("# openssl rand -hex 32\n4c1f0e5e2d8a9b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// replicaConfig is one replica's configuration: a TLCP listener for the
// ECC suite (client_auth as given), one for ECDHE (client certificates
// verified against clientCA), and a TLS one, all sharing sessions through
// Redis at redisAddrs (one server, or the nodes of a cluster).
func replicaConfig(p *replicaPKI, redisAddrs []string, upstream, eccAuth, clientCA string) string {
	quoted := make([]string, len(redisAddrs))
	for i, a := range redisAddrs {
		quoted[i] = strconv.Quote(a)
	}
	return fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
session_store:
  keys_file: %[1]s
  redis: {addrs: [%[2]s], timeout: 2s}
listeners:
  - name: ecc
    listen: "127.0.0.1:0"
    shared_sessions: true
    tlcp: {sign_cert: %[3]s, sign_key: %[4]s, enc_cert: %[5]s, enc_key: %[6]s, suites: [ECC_SM4_GCM_SM3], %[7]s}
    routes: [{upstream: app}]
  - name: ecdhe
    listen: "127.0.0.1:0"
    shared_sessions: true
    tlcp: {sign_cert: %[3]s, sign_key: %[4]s, enc_cert: %[5]s, enc_key: %[6]s, suites: [ECDHE_SM4_GCM_SM3], client_auth: require_and_verify, client_ca: %[8]s}
    routes: [{upstream: app}]
  - name: web
    listen: "127.0.0.1:0"
    shared_sessions: true
    tls: {cert: %[9]s, key: %[10]s}
    routes: [{upstream: app}]
upstreams:
  app: {targets: ["%[11]s"]}
`, p.keys, strings.Join(quoted, ", "), p.files.SignCert, p.files.SignKey, p.files.EncCert, p.files.EncKey, eccAuth, clientCA, p.tlsCert, p.tlsKey, upstream)
}

type replicaProc struct {
	*served
	cfgFile string
}

func startReplica(t testing.TB, dir, name, cfg string) *replicaProc {
	t.Helper()
	file := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return &replicaProc{served: startServe(t, gmgateCommand("serve", "-c", file), "ecc", "ecdhe", "web"), cfgFile: file}
}

// tlcpHandshake connects to the listener over TLCP with the client's
// session cache and returns the connection's state.
func tlcpHandshake(p *replicaPKI, addr string, suite uint16, cache tlcp.ClientSessionCache) (tlcp.ConnectionState, error) {
	c, err := tlcp.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, &tlcp.Config{
		RootCAs: p.roots, ServerName: "localhost", Certificates: []tlcp.Certificate{p.client},
		CipherSuites: []uint16{suite}, ClientSessionCache: cache,
	})
	if err != nil {
		return tlcp.ConnectionState{}, err
	}
	defer c.Close()
	return c.ConnectionState(), nil
}

// mustHandshake is tlcpHandshake for a handshake that must succeed.
func mustHandshake(t testing.TB, p *replicaPKI, addr string, suite uint16, cache tlcp.ClientSessionCache) tlcp.ConnectionState {
	t.Helper()
	st, err := tlcpHandshake(p, addr, suite, cache)
	if err != nil {
		t.Fatalf("a handshake failed: %v", err)
	}
	return st
}

// storeMetric reads one series of the session store's lookups from a
// replica's /metrics.
func storeMetric(t testing.TB, r *replicaProc, result string) float64 {
	t.Helper()
	return adminMetric(t, r.admin, `gmgate_session_store_lookups_total{result="`+result+`"}`)
}

func adminMetric(t testing.TB, admin, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return 0
}

// inRedis waits until the session id is in Redis.
func inRedis(t testing.TB, rc redis.Cmdable, id []byte) {
	t.Helper()
	waitFor(t, func() bool { return holds(rc, id) })
}

// holds reports whether Redis holds the session id now (under the
// default key prefix).
func holds(rc redis.Cmdable, id []byte) bool {
	return rc.Exists(context.Background(), "gmgate:tlcp:"+hex.EncodeToString(id)).Val() == 1
}

// TestReplicasShareSessions runs Redis and three gmgate serve processes
// that share their sessions through it.
func TestReplicasShareSessions(t *testing.T) {
	rs := testredis.Start(t)
	rc := redis.NewClient(&redis.Options{Addr: rs.Addr(), MaxRetries: -1})
	defer rc.Close()
	dir := t.TempDir()
	p := newReplicaPKI(t, dir)
	up := namedUpstream(t, "app")
	cfg := replicaConfig(p, []string{rs.Addr()}, up, "client_auth: none", p.files.CACert)
	replicas := []*replicaProc{
		startReplica(t, dir, "r1", cfg), startReplica(t, dir, "r2", cfg), startReplica(t, dir, "r3", cfg),
	}

	for _, tc := range []struct {
		listener string
		suite    uint16
	}{{"ecc", tlcp.ECC_SM4_GCM_SM3}, {"ecdhe", tlcp.ECDHE_SM4_GCM_SM3}} {
		t.Run(tc.listener+"/resumes on every replica", func(t *testing.T) {
			cache := tlcp.NewLRUClientSessionCache(4, 0)
			st, err := tlcpHandshake(p, replicas[0].addrs[tc.listener], tc.suite, cache)
			if err != nil {
				t.Fatal(err)
			}
			if st.DidResume {
				t.Fatal("the first handshake resumed")
			}
			inRedis(t, rc, st.SessionID)
			for _, r := range replicas[1:] {
				hits := storeMetric(t, r, "hit")
				st2, err := tlcpHandshake(p, r.addrs[tc.listener], tc.suite, cache)
				if err != nil {
					t.Fatal(err)
				}
				if !st2.DidResume || string(st2.SessionID) != string(st.SessionID) {
					t.Fatalf("replica %s: no resumption of the session from replica 1", r.cfgFile)
				}
				if got := storeMetric(t, r, "hit"); got != hits+1 {
					t.Fatalf("store hits %v -> %v, want one more", hits, got)
				}
			}
		})
	}

	t.Run("gmgate probe --resume-at checks every replica", func(t *testing.T) {
		args := []string{"probe", "--ca", p.files.CACert, "--suite", "ECC_SM4_GCM_SM3"}
		hits := map[*replicaProc]float64{}
		for _, r := range replicas[1:] {
			args = append(args, "--resume-at", r.addrs["ecc"])
			hits[r] = storeMetric(t, r, "hit")
		}
		out, err := gmgateCommand(append(args, "https://"+replicas[0].addrs["ecc"]+"/")...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if !strings.Contains(string(out), "* connected to "+replicas[0].addrs["ecc"]) {
			t.Errorf("the first connection did not go to replica 1:\n%s", out)
		}
		for _, r := range replicas[1:] {
			if want := "* connection to " + r.addrs["ecc"] + " resumed the session: yes"; !strings.Contains(string(out), want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
			if got := storeMetric(t, r, "hit"); got != hits[r]+1 {
				t.Errorf("replica %s: store hits %v -> %v, want one more", r.cfgFile, hits[r], got)
			}
		}
	})

	t.Run("tls/tickets resume on every replica", func(t *testing.T) {
		cache := tls.NewLRUClientSessionCache(4)
		for i, r := range replicas {
			tr := &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: p.tlsRoots, ServerName: "localhost", ClientSessionCache: cache}}
			resp, err := (&http.Client{Transport: tr}).Get("https://" + r.addrs["web"] + "/")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resumed := resp.TLS.DidResume; resumed != (i > 0) {
				t.Fatalf("replica %d: resumed %v", i+1, resumed)
			}
		}
	})

	t.Run("a policy change refuses the session", func(t *testing.T) {
		// Replica 3 now verifies ECC clients, and verifies ECDHE clients
		// against another CA list: sessions made under the old policy
		// are fetched from Redis and refused, and the handshake is a
		// full one.
		strict := replicaConfig(p, []string{rs.Addr()}, up, "client_auth: require_and_verify, client_ca: "+p.files.CACert, p.caBundle)
		r3 := replicas[2]
		if err := os.WriteFile(r3.cfgFile, []byte(strict), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := r3.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		r3.waitLog(t, `"msg":"configuration reloaded"`)
		for _, tc := range []struct {
			listener string
			suite    uint16
		}{{"ecc", tlcp.ECC_SM4_GCM_SM3}, {"ecdhe", tlcp.ECDHE_SM4_GCM_SM3}} {
			cache := tlcp.NewLRUClientSessionCache(4, 0)
			st, err := tlcpHandshake(p, replicas[0].addrs[tc.listener], tc.suite, cache)
			if err != nil {
				t.Fatal(err)
			}
			inRedis(t, rc, st.SessionID)
			if st2, err := tlcpHandshake(p, replicas[1].addrs[tc.listener], tc.suite, cache); err != nil || !st2.DidResume {
				t.Fatalf("%s: replica 2 (old policy) did not resume: %v", tc.listener, err)
			}
			hits := storeMetric(t, r3, "hit")
			st3, err := tlcpHandshake(p, r3.addrs[tc.listener], tc.suite, cache)
			if err != nil {
				t.Fatalf("%s: the full handshake under the new policy failed: %v", tc.listener, err)
			}
			if st3.DidResume {
				t.Fatalf("%s: a session made under the old policy resumed under the new one", tc.listener)
			}
			if got := storeMetric(t, r3, "hit"); got != hits+1 {
				t.Fatalf("%s: replica 3 did not fetch the session (hits %v -> %v): the test proves nothing", tc.listener, hits, got)
			}
		}
	})

	t.Run("a CA swapped for another of its subject refuses the session", func(t *testing.T) {
		// Replica 2 has resumed ECDHE sessions with the client's
		// certificate from Redis, so it knows their CA and checks the
		// chain that a session carries, without verifying its signatures
		// again. Its client_ca becomes another CA of the same subject
		// (the session's binding does not change): the chain's CA is no
		// longer trusted, the session is refused, and the full handshake
		// fails on the client's certificate.
		ours, theirs := caSubject(t, p.files.CACert), caSubject(t, p.otherCA)
		if ours != theirs {
			t.Fatalf("the two CAs have different subjects (%q, %q): the test proves nothing", ours, theirs)
		}
		r2 := replicas[1]
		session := func() tlcp.ClientSessionCache {
			t.Helper()
			cache := tlcp.NewLRUClientSessionCache(4, 0)
			st, err := tlcpHandshake(p, replicas[0].addrs["ecdhe"], tlcp.ECDHE_SM4_GCM_SM3, cache)
			if err != nil {
				t.Fatal(err)
			}
			inRedis(t, rc, st.SessionID)
			return cache
		}
		// Before: a session from replica 1 resumes on replica 2.
		if st, err := tlcpHandshake(p, r2.addrs["ecdhe"], tlcp.ECDHE_SM4_GCM_SM3, session()); err != nil || !st.DidResume {
			t.Fatalf("replica 2 did not resume before the swap: %v", err)
		}
		cache := session()
		reload := func(cfg string, n int) {
			t.Helper()
			if err := os.WriteFile(r2.cfgFile, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := r2.cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return strings.Count(r2.logs.String(), `"msg":"configuration reloaded"`) == n })
		}
		reload(replicaConfig(p, []string{rs.Addr()}, up, "client_auth: none", p.otherCA), 1)
		defer reload(cfg, 2)
		hits := storeMetric(t, r2, "hit")
		if st2, err := tlcpHandshake(p, r2.addrs["ecdhe"], tlcp.ECDHE_SM4_GCM_SM3, cache); err == nil {
			t.Fatalf("a handshake with a certificate from the CA that was swapped out succeeded (resumed %v)", st2.DidResume)
		}
		if got := storeMetric(t, r2, "hit"); got != hits+1 {
			t.Fatalf("replica 2 did not fetch the session (hits %v -> %v): the test proves nothing", hits, got)
		}
	})

	t.Run("Redis down: full handshakes, none failed; back: hits again", func(t *testing.T) {
		r1, r2 := replicas[0], replicas[1]
		handshake := func(addr string, cache tlcp.ClientSessionCache) tlcp.ConnectionState {
			t.Helper()
			return mustHandshake(t, p, addr, tlcp.ECC_SM4_GCM_SM3, cache)
		}
		// A new client each round: a full handshake on replica 1, then
		// a resumption attempt on replica 2.
		round := func() (resumed bool) {
			cache := tlcp.NewLRUClientSessionCache(4, 0)
			handshake(r1.addrs["ecc"], cache)
			return handshake(r2.addrs["ecc"], cache).DidResume
		}
		// Warm: sessions resume through Redis.
		waitFor(t, round)

		// Clients keep coming, on their own, while Redis dies and comes
		// back: not one of their handshakes may fail.
		stop, running := keepHandshaking(func() error {
			cache := tlcp.NewLRUClientSessionCache(4, 0)
			var errs []error
			for _, addr := range []string{r1.addrs["ecc"], r2.addrs["ecc"]} {
				_, err := tlcpHandshake(p, addr, tlcp.ECC_SM4_GCM_SM3, cache)
				errs = append(errs, err)
			}
			return errors.Join(errs...)
		})
		<-running

		rs.Kill()
		full := 0
		for range 20 {
			if !round() {
				full++
			}
		}
		if full != 20 {
			t.Fatalf("with Redis dead, %d of 20 cross-replica handshakes were full ones", full)
		}
		r2.waitLog(t, "session store unreachable")
		r1.waitLog(t, "session store unreachable")
		if v := adminMetric(t, r2.admin, "gmgate_session_store_up"); v != 0 {
			t.Fatalf("gmgate_session_store_up = %v with Redis dead", v)
		}

		rs.Start()
		r2.waitLog(t, "session store reachable again")
		r1.waitLog(t, "session store reachable again")
		hits := storeMetric(t, r2, "hit")
		waitFor(t, round)
		if got := storeMetric(t, r2, "hit"); got <= hits {
			t.Fatalf("store hits did not grow once Redis was back (%v -> %v)", hits, got)
		}
		failures, rounds := stop()
		if len(failures) > 0 || rounds < 10 {
			t.Fatalf("%d of %d rounds had a handshake fail while Redis died and came back: %v", len(failures), rounds, failures)
		}
		if n := strings.Count(r2.logs.String(), "session store unreachable"); n != 1 {
			t.Fatalf("%d unreachable lines for one outage:\n%s", n, r2.logs)
		}
	})
}

// TestReplicasOutlastAHungRedis pauses Redis (SIGSTOP: its port still
// takes connections and requests, and nothing answers) under two gmgate
// serve processes whose session_store.redis.timeout is 300ms: a lookup
// gives up at that bound, every handshake completes as a full one, the
// log says the store is unreachable, and once Redis goes on sessions
// resume across the replicas again.
func TestReplicasOutlastAHungRedis(t *testing.T) {
	rs := testredis.Start(t)
	dir := t.TempDir()
	p := newReplicaPKI(t, dir)
	up := namedUpstream(t, "app")
	cfg := replicaConfig(p, []string{rs.Addr()}, up, "client_auth: none", p.files.CACert)
	cfg = strings.Replace(cfg, "timeout: 2s", "timeout: 300ms", 1)
	r1, r2 := startReplica(t, dir, "r1", cfg), startReplica(t, dir, "r2", cfg)

	for _, tc := range []struct {
		listener string
		suite    uint16
	}{{"ecc", tlcp.ECC_SM4_GCM_SM3}, {"ecdhe", tlcp.ECDHE_SM4_GCM_SM3}} {
		// A new client each round: a full handshake on replica 1, then a
		// resumption attempt on replica 2, which must not wait on Redis
		// longer than its timeout allows.
		var slowest time.Duration
		round := func() (resumed bool) {
			t.Helper()
			cache := tlcp.NewLRUClientSessionCache(4, 0)
			if _, err := tlcpHandshake(p, r1.addrs[tc.listener], tc.suite, cache); err != nil {
				t.Fatalf("%s: a handshake on replica 1 failed: %v", tc.listener, err)
			}
			start := time.Now()
			st, err := tlcpHandshake(p, r2.addrs[tc.listener], tc.suite, cache)
			if err != nil {
				t.Fatalf("%s: a handshake on replica 2 failed: %v", tc.listener, err)
			}
			slowest = max(slowest, time.Since(start))
			return st.DidResume
		}
		waitFor(t, round)

		stop, running := keepHandshaking(func() error {
			cache := tlcp.NewLRUClientSessionCache(4, 0)
			var errs []error
			for _, addr := range []string{r1.addrs[tc.listener], r2.addrs[tc.listener]} {
				_, err := tlcpHandshake(p, addr, tc.suite, cache)
				errs = append(errs, err)
			}
			return errors.Join(errs...)
		})
		<-running

		errorsBefore := storeMetric(t, r2, "error")
		rs.Pause()
		slowest = 0
		for range 10 {
			if round() {
				t.Fatalf("%s: a session made while Redis hangs resumed on the other replica", tc.listener)
			}
		}
		// 300ms for the lookup that finds Redis hung, the rest for the
		// handshake itself on a loaded machine; a lookup left to
		// go-redis's own timeouts, or one that hung, would exceed it.
		if slowest > 2*time.Second {
			t.Fatalf("%s: with Redis hung a handshake on replica 2 took %v; its lookups should give up after 300ms", tc.listener, slowest)
		}
		// Said once: the second outage, within 30 s of the first, is
		// counted in the next line rather than said again.
		r2.waitLog(t, "session store unreachable")
		if got := storeMetric(t, r2, "error"); got <= errorsBefore {
			t.Fatalf("%s: no lookup counted as an error while Redis hung (%v -> %v)", tc.listener, errorsBefore, got)
		}
		if v := adminMetric(t, r2.admin, "gmgate_session_store_up"); v != 0 {
			t.Fatalf("%s: gmgate_session_store_up = %v with Redis hung", tc.listener, v)
		}

		rs.Resume()
		r2.waitLog(t, "session store reachable again") // said once, for the first outage
		waitFor(t, func() bool { return adminMetric(t, r2.admin, "gmgate_session_store_up") == 1 })
		hits := storeMetric(t, r2, "hit")
		waitFor(t, round)
		if got := storeMetric(t, r2, "hit"); got <= hits {
			t.Fatalf("%s: store hits did not grow once Redis went on (%v -> %v)", tc.listener, hits, got)
		}
		failures, rounds := stop()
		if len(failures) > 0 || rounds < 5 {
			t.Fatalf("%s: %d of %d rounds had a handshake fail while Redis hung and went on: %v", tc.listener, len(failures), rounds, failures)
		}
	}
}

// TestReplicasOutlastAFullRedis runs two gmgate serve processes on a
// Redis that reaches its maxmemory under the noeviction policy: it
// refuses new sessions and still answers lookups. The store stays up, a
// session written before resumes on the other replica, new ones are full
// handshakes there (counted as refused writes, and logged), no handshake
// fails, and once Redis has room new sessions are shared again.
func TestReplicasOutlastAFullRedis(t *testing.T) {
	rs := testredis.Start(t)
	rc := rs.Client()
	defer rc.Close()
	ctx := context.Background()
	dir := t.TempDir()
	p := newReplicaPKI(t, dir)
	up := namedUpstream(t, "app")
	cfg := replicaConfig(p, []string{rs.Addr()}, up, "client_auth: none", p.files.CACert)
	r1, r2 := startReplica(t, dir, "r1", cfg), startReplica(t, dir, "r2", cfg)
	handshake := func(addr string, cache tlcp.ClientSessionCache) tlcp.ConnectionState {
		t.Helper()
		return mustHandshake(t, p, addr, tlcp.ECC_SM4_GCM_SM3, cache)
	}

	// A session made before Redis runs out of memory, not yet resumed
	// anywhere but on replica 1.
	early := tlcp.NewLRUClientSessionCache(4, 0)
	inRedis(t, rc, handshake(r1.addrs["ecc"], early).SessionID)

	for _, kv := range [][2]string{{"maxmemory-policy", "noeviction"}, {"maxmemory", "1"}} {
		if err := rc.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	refused := `gmgate_session_store_writes_total{op="set",result="refused"}`
	for range 5 {
		cache := tlcp.NewLRUClientSessionCache(4, 0)
		st := handshake(r1.addrs["ecc"], cache)
		if st.DidResume {
			t.Fatal("a new client resumed")
		}
		if handshake(r2.addrs["ecc"], cache).DidResume {
			t.Fatal("a session made while Redis refused writes resumed on the other replica")
		}
		if holds(rc, st.SessionID) {
			t.Fatal("Redis took a session past its maxmemory: the test proves nothing")
		}
	}
	waitFor(t, func() bool { return adminMetric(t, r1.admin, refused) == 5 })
	if v := adminMetric(t, r1.admin, "gmgate_session_store_up"); v != 1 {
		t.Fatalf("gmgate_session_store_up = %v on a Redis out of memory: it still answers lookups", v)
	}
	hits := storeMetric(t, r2, "hit")
	if !handshake(r2.addrs["ecc"], early).DidResume || storeMetric(t, r2, "hit") != hits+1 {
		t.Fatal("a session stored before Redis ran out of memory did not resume from it on the other replica")
	}
	r1.waitLog(t, "session store refuses new sessions")
	if logs := r1.logs.String(); strings.Count(logs, "refuses new sessions") != 1 || strings.Contains(logs, "unreachable") {
		t.Fatalf("want one refusal line and no outage for five refused writes:\n%s", logs)
	}

	if err := rc.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		cache := tlcp.NewLRUClientSessionCache(4, 0)
		handshake(r1.addrs["ecc"], cache)
		return handshake(r2.addrs["ecc"], cache).DidResume
	})
}

// TestReplicasShareSessionsOverRedisCluster runs two gmgate serve
// processes whose session_store lists the three nodes of a Redis Cluster:
// sessions land on every node and resume on the other replica; a node
// that dies fails no handshake, and once it is back sessions are shared
// again.
func TestReplicasShareSessionsOverRedisCluster(t *testing.T) {
	cluster := testredis.StartCluster(t, 3)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), MaxRetries: -1})
	defer cc.Close()
	dir := t.TempDir()
	p := newReplicaPKI(t, dir)
	up := namedUpstream(t, "app")
	cfg := replicaConfig(p, cluster.Addrs(), up, "client_auth: none", p.files.CACert)
	r1, r2 := startReplica(t, dir, "r1", cfg), startReplica(t, dir, "r2", cfg)

	// share makes n sessions on replica 1, each in Redis before it
	// returns, checks that they are spread over every node, and tries to
	// resume them on replica 2, returning how many resumed. A handshake
	// that fails fails the test.
	const n = 24
	share := func(t *testing.T, listener string, suite uint16) (resumed int) {
		t.Helper()
		before := cluster.Keys(t)
		caches := make([]tlcp.ClientSessionCache, n)
		for i := range caches {
			caches[i] = tlcp.NewLRUClientSessionCache(4, 0)
			st, err := tlcpHandshake(p, r1.addrs[listener], suite, caches[i])
			if err != nil {
				t.Fatal(err)
			}
			if st.DidResume {
				t.Fatal("a first handshake resumed")
			}
			inRedis(t, cc, st.SessionID)
		}
		after := cluster.Keys(t)
		var added int64
		for i := range after {
			if after[i] == before[i] {
				t.Fatalf("node %s got none of %d sessions (keys per node before %v, after %v): the test proves nothing", cluster.Nodes[i].Addr(), n, before, after)
			}
			added += after[i] - before[i]
		}
		if added != n {
			t.Fatalf("the nodes hold %d new keys for %d sessions (before %v, after %v)", added, n, before, after)
		}
		for i, cache := range caches {
			st, err := tlcpHandshake(p, r2.addrs[listener], suite, cache)
			if err != nil {
				t.Fatalf("resuming session %d on replica 2: %v", i, err)
			}
			if st.DidResume {
				resumed++
			}
		}
		return resumed
	}

	for _, tc := range []struct {
		listener string
		suite    uint16
	}{{"ecc", tlcp.ECC_SM4_GCM_SM3}, {"ecdhe", tlcp.ECDHE_SM4_GCM_SM3}} {
		t.Run(tc.listener+"/sessions on every node resume on the other replica", func(t *testing.T) {
			hits := storeMetric(t, r2, "hit")
			if got := share(t, tc.listener, tc.suite); got != n {
				t.Fatalf("%d of %d sessions from replica 1 resumed on replica 2", got, n)
			}
			if got := storeMetric(t, r2, "hit"); got != hits+n {
				t.Fatalf("store hits %v -> %v, want %d more", hits, got, n)
			}
		})
	}

	t.Run("a dead node fails no handshake; back, sessions are shared again", func(t *testing.T) {
		// Sessions made before the node dies, some of them on it.
		caches := make([]tlcp.ClientSessionCache, n)
		for i := range caches {
			caches[i] = tlcp.NewLRUClientSessionCache(4, 0)
			st, err := tlcpHandshake(p, r1.addrs["ecc"], tlcp.ECC_SM4_GCM_SM3, caches[i])
			if err != nil {
				t.Fatal(err)
			}
			inRedis(t, cc, st.SessionID)
		}
		if cluster.Keys(t)[1] == 0 {
			t.Fatal("the node to kill holds no session: the test proves nothing")
		}
		cluster.Nodes[1].Kill()
		resumed := 0
		for i, cache := range caches {
			st, err := tlcpHandshake(p, r2.addrs["ecc"], tlcp.ECC_SM4_GCM_SM3, cache)
			if err != nil {
				t.Fatalf("handshake %d failed with a cluster node dead: %v", i, err)
			}
			if st.DidResume {
				resumed++
			}
		}
		if resumed == n {
			t.Fatalf("all %d sessions resumed with a node that held some of them dead: the test proves nothing", n)
		}
		r2.waitLog(t, "session store unreachable")

		cluster.Nodes[1].Start()
		cluster.WaitOK(t)
		waitFor(t, func() bool {
			cache := tlcp.NewLRUClientSessionCache(4, 0)
			if _, err := tlcpHandshake(p, r1.addrs["ecc"], tlcp.ECC_SM4_GCM_SM3, cache); err != nil {
				t.Fatal(err)
			}
			st, err := tlcpHandshake(p, r2.addrs["ecc"], tlcp.ECC_SM4_GCM_SM3, cache)
			if err != nil {
				t.Fatal(err)
			}
			return st.DidResume
		})
		if got := share(t, "ecc", tlcp.ECC_SM4_GCM_SM3); got != n {
			t.Fatalf("with the node back, %d of %d sessions resumed on replica 2", got, n)
		}
	})
}

// TestReplicasShareSessionsThroughSentinel runs two gmgate serve
// processes whose session_store names a master that a Redis Sentinel
// watches, the master with a password and the Sentinel with an ACL user of
// its own:
// sessions are shared through the master; when the master dies, no
// handshake fails, and once the Sentinel has promoted the replica
// sessions are shared through it.
func TestReplicasShareSessionsThroughSentinel(t *testing.T) {
	sn := testredis.StartSentinel(t, testredis.SentinelOptions{Name: "gmgate-sessions", MasterPassword: "master-secret", SentinelUser: "watcher", SentinelPassword: "sentinel-secret"})
	t.Setenv("GMGATE_TEST_REDIS_PASSWORD", "master-secret")
	dir := t.TempDir()
	p := newReplicaPKI(t, dir)
	sentinelPassword := filepath.Join(dir, "sentinel.password")
	if err := os.WriteFile(sentinelPassword, []byte("sentinel-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	up := namedUpstream(t, "app")
	cfg := replicaConfig(p, []string{sn.Sentinel.Addr()}, up, "client_auth: none", p.files.CACert)
	cfg = strings.Replace(cfg, "timeout: 2s}", "timeout: 2s, master_name: gmgate-sessions, password_env: GMGATE_TEST_REDIS_PASSWORD, sentinel_username: watcher, sentinel_password_file: "+sentinelPassword+"}", 1)
	r1, r2 := startReplica(t, dir, "r1", cfg), startReplica(t, dir, "r2", cfg)

	// round makes a session on replica 1 and offers it to replica 2; it
	// returns the session and whether it resumed there.
	round := func() (id []byte, resumed bool, err error) {
		cache := tlcp.NewLRUClientSessionCache(4, 0)
		st, err := tlcpHandshake(p, r1.addrs["ecc"], tlcp.ECC_SM4_GCM_SM3, cache)
		if err != nil {
			return nil, false, err
		}
		st2, err := tlcpHandshake(p, r2.addrs["ecc"], tlcp.ECC_SM4_GCM_SM3, cache)
		return st.SessionID, st2.DidResume, err
	}
	// shared waits until a round resumes with a session that is on the
	// master the Sentinel names. (Sessions written to the old master in
	// the moment before the replicas learn of a failover are lost with
	// it: each costs one full handshake.)
	shared := func(t *testing.T) {
		t.Helper()
		master := sn.MasterClient(t)
		defer master.Close()
		waitFor(t, func() bool {
			id, resumed, err := round()
			if err != nil {
				t.Fatal(err)
			}
			// Replica 2 resumed it from Redis: it is on the master
			// replica 2 asked.
			return resumed && holds(master, id)
		})
	}

	t.Run("sessions resume on the other replica", func(t *testing.T) {
		hits := storeMetric(t, r2, "hit")
		shared(t)
		if got := storeMetric(t, r2, "hit"); got <= hits {
			t.Fatalf("store hits %v -> %v", hits, got)
		}
	})

	t.Run("config check asks Redis through the Sentinel", func(t *testing.T) {
		if out, code := runGmgate(t, nil, "config", "check", "-c", r1.cfgFile); code != 0 || strings.Contains(out, "does not answer") {
			t.Fatalf("config check of the Sentinel setup (exit %d):\n%s", code, out)
		}
		wrong := filepath.Join(dir, "wrong.yaml")
		cfg := strings.Replace(cfg, "master_name: gmgate-sessions", "master_name: no-such-master", 1)
		if err := os.WriteFile(wrong, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		out, _ := runGmgate(t, nil, "config", "check", "-c", wrong)
		if strings.Contains(out, "redis: ") && strings.Contains(out, "sentinel.go") {
			t.Errorf("the Redis client's own lines reached the check's output:\n%s", out)
		}
		if !strings.Contains(out, "session_store.redis.addrs: Redis does not answer") {
			t.Fatalf("config check of a master the Sentinel does not know:\n%s", out)
		}
	})

	t.Run("the master dies: no handshake fails; then shared through the new one", func(t *testing.T) {
		old := sn.Master(t)
		stop, _ := keepHandshaking(func() error {
			_, _, err := round()
			return err
		})
		sn.KillMaster(t)
		if sn.Master(t) == old {
			t.Fatal("the master did not change: the test proves nothing")
		}
		shared(t)
		failures, rounds := stop()
		if len(failures) > 0 || rounds < 10 {
			t.Fatalf("%d of %d rounds had a handshake fail while the master died and was replaced: %v", len(failures), rounds, failures)
		}
		// The outage and the failover are in the log, as records of the
		// process log.
		r1.waitLog(t, "session store unreachable")
		r1.waitLog(t, "session store reachable again")
		for _, r := range []*replicaProc{r1, r2} {
			r.waitLog(t, `sentinel: new master=\"gmgate-sessions\" addr=\"`+sn.Master(t)+`\"","component":"redis"`)
			for _, line := range strings.Split(strings.TrimSpace(r.logs.String()), "\n") {
				if !strings.HasPrefix(line, "{") {
					t.Errorf("%s: a line that is not a JSON record: %s", r.cfgFile, line)
				}
			}
		}
	})
}

// TestReplicasShareSessionsOverRedisTLS runs two gmgate serve processes
// that share sessions through a Redis that speaks TLS only, requires a
// client certificate and lets in one ACL user; config check tells a wrong
// CA, a missing client certificate, a wrong server name and a wrong user
// apart from a good setup.
func TestReplicasShareSessionsOverRedisTLS(t *testing.T) {
	rs := testredis.StartTLS(t, "gmgate", "acl-secret")
	t.Setenv("GMGATE_TEST_REDIS_PASSWORD", "acl-secret")
	f := rs.TLS
	rc := rs.Client()
	defer rc.Close()
	dir := t.TempDir()
	p := newReplicaPKI(t, dir)
	up := namedUpstream(t, "app")
	base := replicaConfig(p, []string{rs.Addr()}, up, "client_auth: none", p.files.CACert)
	// with is the configuration with these redis settings besides addrs.
	with := func(redisYAML string) string {
		return strings.Replace(base, "timeout: 2s}", "timeout: 2s, "+redisYAML+"}", 1)
	}
	const user = "username: gmgate, password_env: GMGATE_TEST_REDIS_PASSWORD"
	goodTLS := fmt.Sprintf("ca: %s, cert: %s, key: %s", f.CA, f.ClientCert, f.ClientKey)
	good := user + ", tls: {" + goodTLS + "}"
	r1, r2 := startReplica(t, dir, "r1", with(good)), startReplica(t, dir, "r2", with(good))

	t.Run("sessions resume on the other replica", func(t *testing.T) {
		cache := tlcp.NewLRUClientSessionCache(4, 0)
		st, err := tlcpHandshake(p, r1.addrs["ecc"], tlcp.ECC_SM4_GCM_SM3, cache)
		if err != nil {
			t.Fatal(err)
		}
		inRedis(t, rc, st.SessionID)
		hits := storeMetric(t, r2, "hit")
		st2, err := tlcpHandshake(p, r2.addrs["ecc"], tlcp.ECC_SM4_GCM_SM3, cache)
		if err != nil || !st2.DidResume {
			t.Fatalf("no resumption on replica 2 (%v)", err)
		}
		if got := storeMetric(t, r2, "hit"); got != hits+1 {
			t.Fatalf("store hits %v -> %v, want one more", hits, got)
		}
	})

	t.Run("config check", func(t *testing.T) {
		for _, c := range []struct {
			name, redis string
			answers     bool
		}{
			{"good", good, true},
			{"server name", user + ", tls: {" + goodTLS + ", server_name: localhost}", true},
			{"another CA", user + fmt.Sprintf(", tls: {ca: %s, cert: %s, key: %s}", p.tlsCert, f.ClientCert, f.ClientKey), false},
			{"no client certificate", user + ", tls: {ca: " + f.CA + "}", false},
			{"wrong server name", user + ", tls: {" + goodTLS + ", server_name: other.example}", false},
			{"the default user", "password_env: GMGATE_TEST_REDIS_PASSWORD, tls: {" + goodTLS + "}", false},
			{"no TLS", user, false},
		} {
			file := filepath.Join(dir, "check-"+strings.ReplaceAll(c.name, " ", "-")+".yaml")
			if err := os.WriteFile(file, []byte(with(c.redis)), 0o600); err != nil {
				t.Fatal(err)
			}
			out, code := runGmgate(t, nil, "config", "check", "-c", file)
			warned := strings.Contains(out, "session_store.redis.addrs: Redis does not answer")
			// Where Redis answers, the user's rights take a session's write.
			if c.answers && strings.Contains(out, "session_store.redis") {
				t.Errorf("%s: a warning about a Redis that takes sessions:\n%s", c.name, out)
			}
			if code != 0 || warned == c.answers {
				t.Errorf("%s: exit %d, Redis answers %v, want %v:\n%s", c.name, code, !warned, c.answers, out)
			}
		}
	})
}

// keepHandshaking runs round again and again in the background until
// the stop it returns is called; stop returns the errors of the rounds
// that failed and how many rounds ran. running is closed once the first
// round has ended, so that what the test does next happens while clients
// are coming.
func keepHandshaking(round func() error) (stop func() (failures []error, rounds int), running <-chan struct{}) {
	done := make(chan struct{})
	first := make(chan struct{})
	var wg sync.WaitGroup
	var failures []error
	rounds := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := round(); err != nil {
				failures = append(failures, err)
			}
			if rounds++; rounds == 1 {
				close(first)
			}
		}
	}()
	return func() ([]error, int) {
		close(done)
		wg.Wait()
		return failures, rounds
	}, first
}

// caSubject returns the subject of the first certificate in a PEM file.
func caSubject(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM block", file)
	}
	c, err := smx509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return string(c.RawSubject)
}
