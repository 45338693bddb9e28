package proxy

import (
	"context"
	"crypto"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/accel"
	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/tlcp"
)

// cardLikeBackend opens file keys but hands them out without SM2 key
// agreement, as keys held by a crypto card are.
type cardLikeBackend struct{}

type cardLikeKey struct{ k accel.Key }

func (c cardLikeKey) Public() crypto.PublicKey { return c.k.Public() }
func (c cardLikeKey) Sign(r io.Reader, m []byte, o crypto.SignerOpts) ([]byte, error) {
	return c.k.Sign(r, m, o)
}
func (c cardLikeKey) Decrypt(r io.Reader, m []byte, o crypto.DecrypterOpts) ([]byte, error) {
	return c.k.(crypto.Decrypter).Decrypt(r, m, o)
}
func (c cardLikeKey) Backend() string { return "cardlike" }
func (c cardLikeKey) Close() error    { return nil }

func (cardLikeBackend) Open(ctx context.Context, ref *accel.Ref) (accel.Key, error) {
	k, err := accel.Open(ctx, "file:"+ref.Path)
	if err != nil {
		return nil, err
	}
	return cardLikeKey{k}, nil
}

func init() { accel.Register("cardlike", cardLikeBackend{}) }

func TestECDHEWithCardEncryptionKey(t *testing.T) {
	p := getPKI(t)
	t.Run("explicit ECDHE suites are refused", func(t *testing.T) {
		cfg := testConfig(p, "http://127.0.0.1:1")
		cfg.Listeners[0].TLCP.EncKey = "cardlike:" + p.dual.EncKey
		cfg.Listeners[0].TLCP.Suites = []string{"ECC_SM4_GCM_SM3", "ECDHE_SM4_GCM_SM3"}
		cfg.Listeners[0].TLCP.SuitesDefaulted = false
		_, err := New(cfg, Options{Logger: testLogger(t)})
		if err == nil || !strings.Contains(err.Error(), cfg.Listeners[0].Path()+".tlcp.suites: "+accel.ErrNoKeyAgreement.Error()) {
			t.Fatalf("got %v, want a tlcp.suites error about key agreement", err)
		}
		if n := strings.Count(err.Error(), cfg.Listeners[0].Path()); n != 1 || strings.Contains(err.Error(), "listener edge") {
			t.Errorf("the listener is named %d times: %v", n, err)
		}
	})
	t.Run("default suites drop ECDHE", func(t *testing.T) {
		cfg := testConfig(p, "http://127.0.0.1:1")
		cfg.Listeners[0].TLCP.EncKey = "cardlike:" + p.dual.EncKey
		if !cfg.Listeners[0].TLCP.SuitesDefaulted {
			t.Fatal("test config does not use the default suites")
		}
		s := startServer(t, cfg, nil)
		// ECC still works; a client offering only ECDHE finds no suite.
		conn, err := tlcp.Dial("tcp", s.Addr("edge").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost", CipherSuites: []uint16{tlcp.ECC_SM4_GCM_SM3}})
		if err != nil {
			t.Fatal(err)
		}
		conn.Close()
		client, err := p.ca.IssueDual(pki.IssueOptions{DNSNames: []string{"client.test"}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = tlcp.Dial("tcp", s.Addr("edge").String(), &tlcp.Config{RootCAs: p.roots, ServerName: "localhost",
			CipherSuites: []uint16{tlcp.ECDHE_SM4_GCM_SM3}, Certificates: []tlcp.Certificate{*client.Certificate()}})
		var ae *tlcp.AlertError
		if !errors.As(err, &ae) || ae.Alert != tlcp.AlertHandshakeFailure {
			t.Fatalf("ECDHE-only client: %v, want handshake_failure", err)
		}
	})
}
