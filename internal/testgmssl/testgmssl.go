// Package testgmssl makes a TLCP server of the tlcp package answer a
// client as a GmSSL 3 server does when it asks for a client certificate
// (docs/protocol.md, "Client certificates and the GmSSL profile"), so
// that tests can tell the client profiles apart without GmSSL. The tlcp
// server accepts both profiles' forms; the connection wrapper here reads
// the client's flight as it passes and refuses what GmSSL refuses:
//
//   - with the ECC suites, a certificate list whose second entry is not a
//     CA of the first (the standard profile's encryption certificate): a
//     bad_certificate alert;
//   - with the ECDHE suites, a ClientKeyExchange of the bare 69-byte point
//     (the standard profile's form): a decode_error alert.
//
// It is for tests only. It parses what a test client sends, and gives up
// on anything it does not follow by passing it through.
package testgmssl

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/tlcp"
)

// Listener wraps every connection l accepts with Conn.
func Listener(l net.Listener) net.Listener { return &listener{Listener: l} }

type listener struct{ net.Listener }

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Conn(c), nil
}

// Conn wraps the server's side of a connection.
func Conn(c net.Conn) net.Conn { return &conn{Conn: c} }

// ErrRefused is what the server's reads return once the wrapper refused
// the client's flight.
var ErrRefused = errors.New("testgmssl: refused the client's flight as GmSSL 3 does")

const (
	recordHandshake        = 22
	recordChangeCipherSpec = 20
	recordAlert            = 21

	typeServerHello       = 2
	typeCertificate       = 11
	typeClientKeyExchange = 16

	alertBadCertificate = 42
	alertDecodeError    = 50
)

type conn struct {
	net.Conn
	mu sync.Mutex
	// in and out are the records not yet parsed of each direction, hs
	// the client's handshake bytes not yet parsed as messages.
	in, hs, out []byte
	// done is set once the client's plain flight is over (its
	// ChangeCipherSpec), or the wrapper gave up.
	done   bool
	ecdhe  bool
	suite  bool // the ServerHello was seen
	refuse bool
}

func (c *conn) Write(b []byte) (int, error) {
	c.mu.Lock()
	if !c.suite && !c.done {
		c.out = append(c.out, b...)
		c.readServerHello()
	}
	c.mu.Unlock()
	return c.Conn.Write(b)
}

// readServerHello learns the suite from the server's first record.
func (c *conn) readServerHello() {
	if len(c.out) < 5 {
		return
	}
	n := int(binary.BigEndian.Uint16(c.out[3:5]))
	if len(c.out) < 5+n {
		return
	}
	rec := c.out[5 : 5+n]
	c.suite = true
	c.out = nil
	// type(1) length(3) version(2) random(32) session_id(1+n) suite(2)
	if len(rec) < 4+2+32+1 || rec[0] != typeServerHello {
		c.done = true
		return
	}
	body := rec[4:]
	sid := int(body[34])
	if len(body) < 35+sid+2 {
		c.done = true
		return
	}
	id := binary.BigEndian.Uint16(body[35+sid:])
	for _, s := range tlcp.CipherSuites() {
		if s.ID == id {
			c.ecdhe = s.ECDHE
		}
	}
}

func (c *conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refuse {
		return 0, ErrRefused
	}
	if n > 0 && !c.done {
		c.in = append(c.in, b[:n]...)
		if alert := c.inspect(); alert != 0 {
			c.refuse = true
			_, _ = c.Conn.Write([]byte{recordAlert, 1, 1, 0, 2, 2, alert})
			c.Conn.Close()
			return 0, ErrRefused
		}
	}
	return n, err
}

// inspect parses the client's records read so far and returns the alert
// GmSSL would send, 0 for none.
func (c *conn) inspect() byte {
	for len(c.in) >= 5 && !c.done {
		n := int(binary.BigEndian.Uint16(c.in[3:5]))
		if len(c.in) < 5+n {
			return 0
		}
		typ, rec := c.in[0], c.in[5:5+n]
		c.in = c.in[5+n:]
		switch typ {
		case recordChangeCipherSpec:
			c.done = true
		case recordHandshake:
			c.hs = append(c.hs, rec...)
			if a := c.messages(); a != 0 {
				return a
			}
		}
	}
	return 0
}

func (c *conn) messages() byte {
	for len(c.hs) >= 4 {
		n := int(c.hs[1])<<16 | int(c.hs[2])<<8 | int(c.hs[3])
		if len(c.hs) < 4+n {
			return 0
		}
		typ, body := c.hs[0], c.hs[4:4+n]
		c.hs = c.hs[4+n:]
		switch {
		case typ == typeCertificate && !c.ecdhe && !oneChain(body):
			return alertBadCertificate
		case typ == typeClientKeyExchange && c.ecdhe && len(body) == 69:
			return alertDecodeError
		}
	}
	return 0
}

// oneChain reports whether a Certificate message's list is one chain:
// every certificate after the first is a CA (an unparsable list counts
// as one, and is left to the server).
func oneChain(body []byte) bool {
	if len(body) < 3 {
		return true
	}
	list := body[3:]
	for i := 0; len(list) >= 3; i++ {
		n := int(list[0])<<16 | int(list[1])<<8 | int(list[2])
		if len(list) < 3+n {
			return true
		}
		if i > 0 {
			cert, err := smx509.ParseCertificate(list[3 : 3+n])
			if err == nil && !cert.IsCA {
				return false
			}
		}
		list = list[3+n:]
	}
	return true
}
