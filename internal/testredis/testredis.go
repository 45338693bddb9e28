// Package testredis runs real redis-server processes for tests: a single
// server that a test can kill and start again, and a Redis Cluster of
// several masters. Tests that use it are skipped, with a message saying
// how to install it, when redis-server is not installed.
package testredis

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/internal/testwait"
	"github.com/redis/go-redis/v9"
)

// Server is one redis-server process on a loopback port of its own.
type Server struct {
	t       testing.TB
	bin     string
	dir     string
	port    int
	cluster bool
	cmd     *exec.Cmd
	done    chan struct{}
}

// Start starts redis-server, or skips the test when it is not installed.
// The server is killed when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := newServer(t, false)
	s.Start()
	return s
}

func newServer(t testing.TB, cluster bool) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (apt-get install redis-server; .ci/run installs it): this test needs a real Redis")
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir(), port: freePort(t), cluster: cluster}
	t.Cleanup(s.Kill)
	return s
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Start starts the server (again, after Kill) on its port and waits
// until it answers.
func (s *Server) Start() {
	s.t.Helper()
	args := []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--loglevel", "warning"}
	if s.cluster {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000")
	}
	s.cmd = exec.Command(s.bin, args...)
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

// Client is a client of this server alone (not of its cluster); the caller
// closes it.
func (s *Server) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
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
		s := newServer(t, true)
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
