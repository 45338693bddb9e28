package tlcp

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
)

// Server returns a server-side TLCP connection over conn. config must hold
// at least one Certificate or a GetCertificate callback.
func Server(conn net.Conn, config *Config) *Conn {
	return &Conn{conn: conn, config: config}
}

// Client returns a client-side TLCP connection over conn. config must set
// ServerName or InsecureSkipVerify.
func Client(conn net.Conn, config *Config) *Conn {
	return &Conn{conn: conn, config: config, isClient: true}
}

type listener struct {
	net.Listener
	config *Config
}

// Accept waits for a connection and wraps it; the handshake runs on the
// first Read or Write (or an explicit Handshake).
func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Server(c, l.config), nil
}

// NewListener wraps inner so that each accepted connection is a TLCP
// server connection.
func NewListener(inner net.Listener, config *Config) net.Listener {
	return &listener{Listener: inner, config: config}
}

// Listen listens on network/laddr for TLCP connections.
func Listen(network, laddr string, config *Config) (net.Listener, error) {
	if config == nil || (len(config.Certificates) == 0 && config.GetCertificate == nil && config.GetConfigForClient == nil) {
		return nil, errors.New("tlcp: neither Certificates, GetCertificate, nor GetConfigForClient set in Config")
	}
	l, err := net.Listen(network, laddr)
	if err != nil {
		return nil, err
	}
	return NewListener(l, config), nil
}

// Dial connects to addr and performs a TLCP handshake.
func Dial(network, addr string, config *Config) (*Conn, error) {
	return DialWithDialer(new(net.Dialer), network, addr, config)
}

// DialWithDialer connects with dialer and performs a TLCP handshake; the
// dialer's Timeout and Deadline cover the handshake too.
func DialWithDialer(dialer *net.Dialer, network, addr string, config *Config) (*Conn, error) {
	ctx := context.Background()
	if dialer.Timeout != 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, dialer.Timeout)
		defer cancel()
	}
	if !dialer.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dialer.Deadline)
		defer cancel()
	}
	return dialContext(ctx, dialer, network, addr, config)
}

// Dialer dials TLCP connections with a context.
type Dialer struct {
	// NetDialer is the dialer for the underlying TCP connection; a zero
	// net.Dialer when nil.
	NetDialer *net.Dialer
	Config    *Config
}

// DialContext connects and handshakes, giving up when ctx is done.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	nd := d.NetDialer
	if nd == nil {
		nd = new(net.Dialer)
	}
	c, err := dialContext(ctx, nd, network, addr, d.Config)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Dial connects and handshakes.
func (d *Dialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

func dialContext(ctx context.Context, dialer *net.Dialer, network, addr string, config *Config) (*Conn, error) {
	raw, err := dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if config == nil {
		config = &Config{}
	}
	if config.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		config = config.Clone()
		config.ServerName = host
	}
	conn := Client(raw, config)
	if err := conn.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, err
	}
	return conn, nil
}

// X509KeyPair builds a Certificate from PEM data: the signing certificate
// (with its chain) and key, and the encryption certificate (with its
// chain) and key. encCertPEM and encKeyPEM may both be nil for a client
// that authenticates with a signing certificate only. Keys may be PKCS#8
// or SEC 1 ("EC PRIVATE KEY"), unencrypted.
func X509KeyPair(signCertPEM, signKeyPEM, encCertPEM, encKeyPEM []byte) (Certificate, error) {
	var cert Certificate
	var err error
	cert.SignCertificate, cert.SignLeaf, cert.SignKey, err = pemKeyPair(signCertPEM, signKeyPEM)
	if err != nil {
		return Certificate{}, fmt.Errorf("tlcp: signing pair: %w", err)
	}
	if encCertPEM == nil && encKeyPEM == nil {
		return cert, nil
	}
	cert.EncCertificate, cert.EncLeaf, cert.EncKey, err = pemKeyPair(encCertPEM, encKeyPEM)
	if err != nil {
		return Certificate{}, fmt.Errorf("tlcp: encryption pair: %w", err)
	}
	return cert, nil
}

// LoadX509KeyPair reads the four PEM files of X509KeyPair. encCertFile and
// encKeyFile may both be empty.
func LoadX509KeyPair(signCertFile, signKeyFile, encCertFile, encKeyFile string) (Certificate, error) {
	read := func(name string) ([]byte, error) {
		if name == "" {
			return nil, nil
		}
		return os.ReadFile(name)
	}
	var data [4][]byte
	for i, name := range []string{signCertFile, signKeyFile, encCertFile, encKeyFile} {
		b, err := read(name)
		if err != nil {
			return Certificate{}, err
		}
		data[i] = b
	}
	return X509KeyPair(data[0], data[1], data[2], data[3])
}

func pemKeyPair(certPEM, keyPEM []byte) ([][]byte, *smx509.Certificate, crypto.PrivateKey, error) {
	var chain [][]byte
	for rest := certPEM; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type == "CERTIFICATE" {
			chain = append(chain, block.Bytes)
		}
	}
	if len(chain) == 0 {
		return nil, nil, nil, errors.New("no CERTIFICATE block in the certificate PEM data")
	}
	leaf, err := smx509.ParseCertificate(chain[0])
	if err != nil {
		return nil, nil, nil, err
	}
	var keyDER *pem.Block
	for rest := keyPEM; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type == "PRIVATE KEY" || strings.HasSuffix(block.Type, " PRIVATE KEY") {
			keyDER = block
			break
		}
	}
	if keyDER == nil {
		return nil, nil, nil, errors.New("no PRIVATE KEY block in the key PEM data")
	}
	key, err := ParsePrivateKey(keyDER.Bytes)
	if err != nil {
		return nil, nil, nil, err
	}
	pub, err := sm2PublicKey(leaf.PublicKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("certificate %q: %w", leaf.Subject, err)
	}
	if !pub.Equal(key.Public()) {
		return nil, nil, nil, fmt.Errorf("private key does not match the public key of certificate %q", leaf.Subject)
	}
	return chain, leaf, key, nil
}

// ParsePrivateKey parses an unencrypted SM2 private key in PKCS#8 or SEC 1
// DER form.
func ParsePrivateKey(der []byte) (*sm2.PrivateKey, error) {
	if k, err := smx509.ParsePKCS8PrivateKey(der); err == nil {
		switch k := k.(type) {
		case *sm2.PrivateKey:
			return k, nil
		case *ecdsa.PrivateKey:
			if sm2.IsSM2PublicKey(&k.PublicKey) {
				return new(sm2.PrivateKey).FromECPrivateKey(k)
			}
		}
		return nil, fmt.Errorf("key of type %T is not an SM2 key", k)
	}
	if k, err := smx509.ParseSM2PrivateKey(der); err == nil {
		return k, nil
	}
	return nil, errors.New("cannot parse the private key as PKCS#8 or SEC 1 SM2")
}
