// Package testredis runs real redis-server processes for tests: a single
// server that a test can kill and start again, a Redis Cluster of several
// masters, and a master with a replica under a Redis Sentinel. Tests that
// use it are skipped, with a message saying how to install it, when
// redis-server is not installed.
package testredis

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gmgate/gmgate/internal/testnet"
	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/redis/go-redis/v9"
)

// Server is one redis-server process on a loopback port of its own.
type Server struct {
	t     testing.TB
	bin   string
	dir   string
	port  int
	mode  string   // "", "cluster" or "sentinel"
	extra []string // more arguments
	// username and password are what clients log in with, if anything.
	username, password string
	// TLS, when set, makes the server speak TLS only, and require a
	// client certificate from its CA.
	TLS  *TLSFiles
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts redis-server, or skips the test when it is not installed.
// The server is killed when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := newServer(t, "")
	s.Start()
	return s
}

func newServer(t testing.TB, mode string, extra ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (apt-get install redis-server; .ci/run installs it): this test needs a real Redis")
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir(), port: testnet.FreePort(t), mode: mode, extra: extra}
	t.Cleanup(s.Kill)
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Start starts the server (again, after Kill) on its port and waits
// until it answers.
func (s *Server) Start() {
	s.t.Helper()
	args := []string{"--port", strconv.Itoa(s.port)}
	if f := s.TLS; f != nil {
		args = []string{"--port", "0", "--tls-port", strconv.Itoa(s.port), "--tls-cert-file", f.ServerCert, "--tls-key-file", f.ServerKey,
			"--tls-ca-cert-file", f.CA, "--tls-auth-clients", "yes"}
	}
	args = append(args, "--bind", "127.0.0.1", "--dir", s.dir, "--loglevel", "warning")
	switch s.mode {
	case "sentinel":
		// A Sentinel needs a configuration file that it can rewrite.
		conf := filepath.Join(s.dir, "sentinel.conf")
		if _, err := os.Stat(conf); err != nil {
			if err := os.WriteFile(conf, nil, 0o600); err != nil {
				s.t.Fatal(err)
			}
		}
		args = append([]string{conf, "--sentinel"}, args...)
	case "cluster":
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000")
		fallthrough
	default:
		args = append(args, "--save", "", "--appendonly", "no")
	}
	s.cmd = exec.Command(s.bin, append(args, s.extra...)...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(s.cmd, s.done)
	c := s.Client()
	defer c.Close()
	testwait.For(s.t, "redis-server on "+s.Addr()+" answers", func() bool { return c.Ping(context.Background()).Err() == nil })
}

// Kill ends the server at once, as a crash would.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Pause stops the server's process (SIGSTOP) without closing a socket:
// the kernel still accepts connections and takes requests, and nothing
// answers them, as with a Redis stuck on a slow disk or a full machine.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume lets a paused server go on (SIGCONT); it then answers what it
// was sent meanwhile.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	if s.cmd == nil {
		s.t.Fatal("testredis: the server is not running")
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
}

// Client is a client of this server alone (not of its cluster); the caller
// closes it.
func (s *Server) Client() *redis.Client {
	o := &redis.Options{Addr: s.Addr(), Username: s.username, Password: s.password, MaxRetries: -1}
	if s.TLS != nil {
		o.TLSConfig = s.TLS.clientConfig(s.t)
	}
	return redis.NewClient(o)
}

// StartTLS starts redis-server speaking TLS only, with a certificate for
// localhost and 127.0.0.1, requiring client certificates (the files are in
// its TLS field), and with one ACL user, user with password, in place of
// the default user, holding only the rights docs/config.md asks for
// session_store under the default key prefix. It skips the test when
// redis-server is not installed.
func StartTLS(t testing.TB, user, password string) *Server {
	t.Helper()
	s := newServer(t, "", "--user", "default", "off", "--user", user, "on", ">"+password, "~gmgate:*", "+@read", "+@write", "+@connection", "+@scripting")
	s.username, s.password = user, password
	s.TLS = newTLSFiles(t, s.dir)
	s.Start()
	return s
}

// Cluster is a Redis Cluster of masters without replicas, its hash slots
// shared evenly among them.
type Cluster struct {
	Nodes []*Server
}

// StartCluster starts a cluster of n masters and waits until every node
// reports the cluster ok, or skips the test when redis-server is not
// installed.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{}
	for range n {
		s := newServer(t, "cluster")
		s.Start()
		c.Nodes = append(c.Nodes, s)
	}
	ctx := context.Background()
	const slots = 16384
	for i, s := range c.Nodes {
		cl := s.Client()
		// Distinct epochs, so that the nodes need not settle collisions.
		err := cl.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err()
		if err == nil {
			err = cl.ClusterAddSlotsRange(ctx, i*slots/n, (i+1)*slots/n-1).Err()
		}
		if err == nil && i > 0 {
			err = cl.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(c.Nodes[0].port)).Err()
		}
		cl.Close()
		if err != nil {
			t.Fatalf("building the cluster on %s: %v", s.Addr(), err)
		}
	}
	c.WaitOK(t)
	return c
}

// WaitOK waits until every node reports the cluster ok and knows every
// node's slots, as after StartCluster or after a node is started again.
func (c *Cluster) WaitOK(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	n := len(c.Nodes)
	for _, s := range c.Nodes {
		cl := s.Client()
		testwait.For(t, "node "+s.Addr()+" to report the cluster ok", func() bool {
			info, err := cl.ClusterInfo(ctx).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)+"\r")
		})
		testwait.For(t, "node "+s.Addr()+" to know every node's slots", func() bool {
			shards, err := cl.ClusterShards(ctx).Result()
			return err == nil && len(shards) == n
		})
		cl.Close()
	}
}

// Addrs are the nodes' addresses, as a cluster client is given them.
func (c *Cluster) Addrs() []string {
	var a []string
	for _, s := range c.Nodes {
		a = append(a, s.Addr())
	}
	return a
}

// Keys counts the keys each node holds, in the order of Nodes.
func (c *Cluster) Keys(t testing.TB) []int64 {
	t.Helper()
	var n []int64
	for _, s := range c.Nodes {
		cl := s.Client()
		k, err := cl.DBSize(context.Background()).Result()
		cl.Close()
		if err != nil {
			t.Fatalf("DBSIZE on %s: %v", s.Addr(), err)
		}
		n = append(n, k)
	}
	return n
}

// Sentinel is a master with one replica, watched by one Redis Sentinel
// (quorum 1) under a master name.
type Sentinel struct {
	Name     string
	Sentinel *Server
	Servers  []*Server // the master as started, then its replica
}

// SentinelOptions are the credentials of a Sentinel setup: the password
// the master and its replica require, and the password the Sentinel
// itself requires, of its ACL user SentinelUser (the default user off)
// when that is set.
type SentinelOptions struct {
	Name, MasterPassword, SentinelUser, SentinelPassword string
}

// StartSentinel starts a master, its replica and a Sentinel that monitors
// them as o.Name, and waits until the Sentinel knows the replica, or skips
// the test when redis-server is not installed.
func StartSentinel(t testing.TB, o SentinelOptions) *Sentinel {
	t.Helper()
	var auth []string
	if o.MasterPassword != "" {
		auth = []string{"--requirepass", o.MasterPassword, "--masterauth", o.MasterPassword}
	}
	master := newServer(t, "", auth...)
	master.password = o.MasterPassword
	master.Start()
	replica := newServer(t, "", append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(master.port)}, auth...)...)
	replica.password = o.MasterPassword
	replica.Start()
	var sauth []string
	switch {
	case o.SentinelUser != "":
		sauth = []string{"--user", "default", "off", "--user", o.SentinelUser, "on", ">" + o.SentinelPassword, "~*", "&*", "+@all"}
	case o.SentinelPassword != "":
		sauth = []string{"--requirepass", o.SentinelPassword}
	}
	sn := &Sentinel{Name: o.Name, Sentinel: newServer(t, "sentinel", sauth...), Servers: []*Server{master, replica}}
	sn.Sentinel.username, sn.Sentinel.password = o.SentinelUser, o.SentinelPassword
	sn.Sentinel.Start()
	ctx := context.Background()
	sc := sn.client()
	defer sc.Close()
	err := sc.Monitor(ctx, o.Name, "127.0.0.1", strconv.Itoa(master.port), "1").Err()
	for _, set := range [][2]string{{"down-after-milliseconds", "1000"}, {"failover-timeout", "5000"}, {"auth-pass", o.MasterPassword}} {
		if err == nil && set[1] != "" {
			err = sc.Set(ctx, o.Name, set[0], set[1]).Err()
		}
	}
	if err != nil {
		t.Fatalf("setting up the Sentinel: %v", err)
	}
	testwait.For(t, "the Sentinel to see the replica", func() bool {
		r, err := sc.Replicas(ctx, o.Name).Result()
		return err == nil && len(r) == 1 && r[0]["flags"] == "slave" && r[0]["master-link-status"] == "ok"
	})
	return sn
}

func (sn *Sentinel) client() *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: sn.Sentinel.Addr(), Username: sn.Sentinel.username, Password: sn.Sentinel.password, MaxRetries: -1})
}

// Master is the address of the master, as the Sentinel says.
func (sn *Sentinel) Master(t testing.TB) string {
	t.Helper()
	sc := sn.client()
	defer sc.Close()
	a, err := sc.GetMasterAddrByName(context.Background(), sn.Name).Result()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(a[0], a[1])
}

// MasterClient is a client of the master the Sentinel names now; the
// caller closes it.
func (sn *Sentinel) MasterClient(t testing.TB) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: sn.Master(t), Password: sn.Servers[0].password, MaxRetries: -1})
}

// KillMaster kills the master the Sentinel names, as a crash would, and
// waits until the Sentinel has promoted the replica and it takes writes
// as the master.
func (sn *Sentinel) KillMaster(t testing.TB) {
	t.Helper()
	old := sn.Master(t)
	for _, s := range sn.Servers {
		if s.Addr() == old {
			s.Kill()
		}
	}
	testwait.For(t, "the Sentinel to name a new master", func() bool { return sn.Master(t) != old })
	c := sn.MasterClient(t)
	defer c.Close()
	testwait.For(t, "the new master to take writes", func() bool {
		return c.Set(context.Background(), "testredis:failover", "done", 0).Err() == nil
	})
}

// TLSFiles are the PEM files of a Redis server that speaks TLS: a CA, the
// server's certificate and key, and a client certificate and key from the
// same CA.
type TLSFiles struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
}

func newTLSFiles(t testing.TB, dir string) *TLSFiles {
	t.Helper()
	f := &TLSFiles{CA: filepath.Join(dir, "ca.crt"), ServerCert: filepath.Join(dir, "server.crt"), ServerKey: filepath.Join(dir, "server.key"),
		ClientCert: filepath.Join(dir, "client.crt"), ClientKey: filepath.Join(dir, "client.key")}
	caCert, caKey := writeCert(t, f.CA, filepath.Join(dir, "ca.key"), &x509.Certificate{
		Subject: pkix.Name{CommonName: "testredis CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign,
	}, nil, nil)
	writeCert(t, f.ServerCert, f.ServerKey, &x509.Certificate{
		Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, caCert, caKey)
	writeCert(t, f.ClientCert, f.ClientKey, &x509.Certificate{
		Subject:  pkix.Name{CommonName: "testredis client"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, caCert, caKey)
	return f
}

// writeCert issues tmpl with a new P-256 key, signed by parent (or by
// itself), writes the certificate to certFile and the key to keyFile, and
// returns both.
func writeCert(t testing.TB, certFile, keyFile string, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// clientConfig is what a client of the server presents and trusts.
func (f *TLSFiles) clientConfig(t testing.TB) *tls.Config {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(b)
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, ServerName: "localhost"}
}
