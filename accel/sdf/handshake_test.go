//go:build cgo

package sdf_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"

	"github.com/gmgate/gmgate/accel"
	"github.com/gmgate/gmgate/internal/testnet"
	"github.com/gmgate/gmgate/internal/testpki"
	"github.com/gmgate/gmgate/tlcp"
)

// identity issues a TLCP certificate pair for the given keys.
func identity(t testing.TB, p *testpki.CA, cn string, signKey, encKey crypto.Signer) tlcp.Certificate {
	t.Helper()
	return tlcp.Certificate{
		SignCertificate: [][]byte{issue(t, p, cn, signKey.Public().(*ecdsa.PublicKey), false)},
		SignKey:         signKey,
		EncCertificate:  [][]byte{issue(t, p, cn, encKey.Public().(*ecdsa.PublicKey), true)},
		EncKey:          encKey,
	}
}

func softwareKey(t testing.TB) accel.Key {
	t.Helper()
	k, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return accel.NewSoftwareKey(k)
}

// serveTLCP runs a TLCP echo server on loopback.
func serveTLCP(t testing.TB, cfg *tlcp.Config) string {
	t.Helper()
	return testnet.Serve(t, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(20 * time.Second))
		s := tlcp.Server(c, cfg)
		if err := s.Handshake(); err != nil {
			return
		}
		io.Copy(s, s)
	})
}

// dialTLCP connects and completes a handshake.
func dialTLCP(addr string, cfg *tlcp.Config) (*tlcp.Conn, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	c := tlcp.Client(nc, cfg)
	if err := c.Handshake(); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// echo checks that data goes through an established connection.
func echo(c *tlcp.Conn, msg string) error {
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != msg {
		return errors.New("echo returned other bytes")
	}
	return nil
}

func TestHandshakeEverySuite(t *testing.T) {
	lib, _, sign, enc := cardServer(t, "")
	ctl := loadLib(t, lib)
	p := newPKI(t)
	cardID := identity(t, p, "server.test", sign, enc)
	// ECDHE needs SM2 key agreement with the encryption key, which stays in
	// software; the signing key stays on the card.
	mixedID := identity(t, p, "server.test", sign, softwareKey(t))
	clientID := identity(t, p, "client.test", softwareKey(t), softwareKey(t))

	for _, s := range tlcp.CipherSuites() {
		t.Run(s.Name, func(t *testing.T) {
			id := cardID
			if s.ECDHE {
				id = mixedID
			}
			addr := serveTLCP(t, &tlcp.Config{Certificates: []tlcp.Certificate{id}, CipherSuites: []uint16{s.ID}, SessionsDisabled: true})
			before := ctl.Stats()
			c, err := dialTLCP(addr, &tlcp.Config{RootCAs: p.Roots, ServerName: "server.test", CipherSuites: []uint16{s.ID},
				Certificates: []tlcp.Certificate{clientID}, SessionsDisabled: true})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if got := c.ConnectionState().CipherSuite; got != s.ID {
				t.Fatalf("negotiated %s", tlcp.CipherSuiteName(got))
			}
			if err := echo(c, "hello over "+s.Name); err != nil {
				t.Fatal(err)
			}
			after := ctl.Stats()
			wantDecrypts := uint64(1)
			if s.ECDHE {
				wantDecrypts = 0
			}
			if after.Signs-before.Signs != 1 || after.Decrypts-before.Decrypts != wantDecrypts {
				t.Errorf("the card made %d signatures and %d decryptions, want 1 and %d", after.Signs-before.Signs, after.Decrypts-before.Decrypts, wantDecrypts)
			}
		})
	}
}

func TestECDHEWithCardEncryptionKey(t *testing.T) {
	lib, c, sign, enc := cardServer(t, "")
	ref := c.ref(lib, 1, "enc", "")
	err := accel.RequireKeyAgreement(ref, enc)
	if !errors.Is(err, accel.ErrNoKeyAgreement) || !strings.Contains(err.Error(), "the sdf backend does not offer") ||
		!strings.Contains(err.Error(), "remove the ECDHE suites") || !strings.Contains(err.Error(), lib+"?REDACTED") {
		t.Errorf("got %v", err)
	}
	if err := accel.RequireKeyAgreement("file:/x", softwareKey(t)); err != nil {
		t.Errorf("software key: %v", err)
	}
	// Served anyway, the card-held encryption key cannot negotiate ECDHE.
	p := newPKI(t)
	ecdhe := []uint16{tlcp.ECDHE_SM4_GCM_SM3, tlcp.ECDHE_SM4_CBC_SM3}
	addr := serveTLCP(t, &tlcp.Config{Certificates: []tlcp.Certificate{identity(t, p, "server.test", sign, enc)}, CipherSuites: ecdhe})
	_, err = dialTLCP(addr, &tlcp.Config{RootCAs: p.Roots, ServerName: "server.test", CipherSuites: ecdhe,
		Certificates: []tlcp.Certificate{identity(t, p, "client.test", softwareKey(t), softwareKey(t))}})
	var ae *tlcp.AlertError
	if !errors.As(err, &ae) || !ae.Remote || ae.Alert != tlcp.AlertHandshakeFailure {
		t.Errorf("got %v, want a handshake_failure alert from the server", err)
	}
}

func TestConcurrentHandshakesThroughFourSessions(t *testing.T) {
	lib, _, sign, enc := cardServer(t, "sessions=4")
	ctl := loadLib(t, lib)
	p := newPKI(t)
	suites := []uint16{tlcp.ECC_SM4_GCM_SM3, tlcp.ECC_SM4_CBC_SM3}
	addr := serveTLCP(t, &tlcp.Config{Certificates: []tlcp.Certificate{identity(t, p, "server.test", sign, enc)}, SessionsDisabled: true})
	before := ctl.Stats()
	const n = 64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dialTLCP(addr, &tlcp.Config{RootCAs: p.Roots, ServerName: "server.test", CipherSuites: suites[i%2:][:1], SessionsDisabled: true})
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			errs <- echo(c, "concurrent")
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	s := ctl.Stats()
	if s.Signs-before.Signs != n || s.Decrypts-before.Decrypts != n {
		t.Errorf("the card made %d signatures and %d decryptions, want %d each", s.Signs-before.Signs, s.Decrypts-before.Decrypts, n)
	}
	if s.BusyViolations != 0 || s.SessionsOpenMax > 4 || s.CallsMax > 4 {
		t.Errorf("sessions open at most %d, calls at once at most %d, overlapping calls on one session %d", s.SessionsOpenMax, s.CallsMax, s.BusyViolations)
	}
}

func TestDeviceErrorWhileServing(t *testing.T) {
	lib, _, sign, enc := cardServer(t, "sessions=2")
	ctl := loadLib(t, lib)
	p := newPKI(t)
	addr := serveTLCP(t, &tlcp.Config{Certificates: []tlcp.Certificate{identity(t, p, "server.test", sign, enc)}, SessionsDisabled: true})
	clientCfg := &tlcp.Config{RootCAs: p.Roots, ServerName: "server.test", SessionsDisabled: true}

	established, err := dialTLCP(addr, clientCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer established.Close()

	// One failed signature fails that handshake with an alert.
	ctl.Control("fail_code", 0x0100000D) // SDR_SIGNERR
	ctl.Control("fail_next", 1)
	_, err = dialTLCP(addr, clientCfg)
	var ae *tlcp.AlertError
	if !errors.As(err, &ae) || !ae.Remote {
		t.Fatalf("handshake during a device error: %v, want an alert from the server", err)
	}
	if c, err := dialTLCP(addr, clientCfg); err != nil {
		t.Fatalf("the next handshake: %v", err)
	} else {
		c.Close()
	}

	// The device goes away: new handshakes fail with an alert, the
	// established connection keeps working, and service resumes when the
	// device answers again.
	ctl.Control("down", 1)
	_, err = dialTLCP(addr, clientCfg)
	if !errors.As(err, &ae) || !ae.Remote {
		t.Fatalf("handshake while the device is down: %v, want an alert from the server", err)
	}
	if err := echo(established, "still here"); err != nil {
		t.Fatalf("established connection: %v", err)
	}
	ctl.Control("down", 0)
	recovered(t, func() error {
		c, err := dialTLCP(addr, clientCfg)
		if err == nil {
			err = echo(c, "back")
			c.Close()
		}
		return err
	})
	if err := echo(established, "still here"); err != nil {
		t.Fatalf("established connection after recovery: %v", err)
	}
}

func TestSelfTestWithCertificates(t *testing.T) {
	_, _, sign, enc := cardServer(t, "")
	p := newPKI(t)
	id := identity(t, p, "server.test", sign, enc)
	ctx := context.Background()
	if err := accel.SelfTest(ctx, sign, parseCert(t, id.SignCertificate[0]), accel.UseSign); err != nil {
		t.Error(err)
	}
	if err := accel.SelfTest(ctx, enc, parseCert(t, id.EncCertificate[0]), accel.UseEnc); err != nil {
		t.Error(err)
	}
}
