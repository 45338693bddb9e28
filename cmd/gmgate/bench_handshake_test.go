package main

import (
	"bytes"
	"net"
	"os/exec"
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
