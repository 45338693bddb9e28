package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A target nobody listens on: the run stops after a second, prints its
// report and exits 1.
func TestBenchHandshakeDeadTargetExitsNonZero(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := gmgateCommand("bench", "handshake", "--target", addr, "--suite", "ECC_SM4_GCM_SM3", "-d", "1m", "--warmup", "0", "--timeout", "200ms", "-q")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %s against a closed port", d)
	}
	if !strings.Contains(stderr.String(), "no handshake succeeded: ECC_SM4_GCM_SM3") {
		t.Errorf("stderr: %s", stderr.String())
	}
	if !strings.Contains(stdout.String(), "Errors by kind") || !strings.Contains(stdout.String(), "stopped after") {
		t.Errorf("report:\n%s", stdout.String())
	}
}

// Under taskset, against a local server given by its PID: the report has
// the server's CPU time and busy share, and the load generator's real CPUs.
func TestBenchHandshakeServerPIDUnderTaskset(t *testing.T) {
	taskset, err := exec.LookPath("taskset")
	if err != nil || runtime.NumCPU() < 2 {
		t.Skip("needs taskset and two CPUs")
	}
	addr, _, _ := tlcpServer(t, func(ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	})
	helper := gmgateCommand("bench", "handshake", "--target", addr, "--server-pid", strconv.Itoa(os.Getpid()), "--suite", "ECC_SM4_GCM_SM3",
		"-c", "4", "-d", "500ms", "--warmup", "100ms", "--json", "-q")
	cmd := exec.Command(taskset, append([]string{"-c", "0"}, helper.Args...)...)
	cmd.Env = helper.Env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var rep struct {
		Machine struct {
			NumCPU int `json:"num_cpu"`
		} `json:"machine"`
		Server struct {
			CPUSource string `json:"cpu_source"`
			Cores     int    `json:"cores"`
		} `json:"server"`
		Load struct {
			CPUs []int `json:"cpus"`
		} `json:"load"`
		Results []struct {
			Handshakes       int64   `json:"handshakes"`
			ServerCPUSeconds float64 `json:"server_cpu_seconds"`
			ServerBusy       float64 `json:"server_busy"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Load.CPUs) != 1 || rep.Load.CPUs[0] != 0 || rep.Machine.NumCPU < 2 {
		t.Errorf("under taskset -c 0: load CPUs %v of %d", rep.Load.CPUs, rep.Machine.NumCPU)
	}
	r := rep.Results[0]
	if rep.Server.CPUSource != "/proc/"+strconv.Itoa(os.Getpid()) || rep.Server.Cores != runtime.NumCPU() || r.Handshakes == 0 || r.ServerCPUSeconds <= 0 || r.ServerBusy <= 0 {
		t.Errorf("server %+v, result %+v", rep.Server, r)
	}
}
