package tlcp

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"slices"
)

// GM-capable TLS clients. 360 Secure Browser's GM mode (and browsers built
// the same way) first sends an ordinary TLS ClientHello - record version
// 0x0301 or 0x0303, client_version 0x0303 - whose cipher suites include
// the TLCP suites ECC_SM4_CBC_SM3 (0xE013) and ECC_SM4_GCM_SM3 (0xE053),
// to say that it can speak TLCP. A server with a TLCP identity may take
// that hello and answer in TLCP 1.1 (ServerForTLSHello); a server that
// will not refuses it with handshake_failure, after which the browser
// retries with a TLCP ClientHello. docs/protocol.md ("GM-capable TLS
// clients") gives the facts and their sources.

// extensionRenegotiationInfo is RFC 5746's renegotiation_info, and
// scsvRenegotiation the signalling suite that stands for it.
const (
	extensionRenegotiationInfo uint16 = 0xff01
	scsvRenegotiation          uint16 = 0x00ff
)

// ServerForTLSHello returns a server-side TLCP connection over conn that
// takes a ClientHello in TLS form as well as one in TLCP form: a hello
// with client_version 0x0301 to 0x0303 (in records of any 3.x version)
// that offers at least one TLCP cipher suite is answered in TLCP 1.1,
// as the patches that make Tongsuo/TASSL servers prefer TLCP for GM
// browsers do. The ServerHello and every record after it are TLCP
// (0x0101); the transcript holds the ClientHello as received; cipher
// suites, client authentication and resumption are decided as for any
// TLCP hello. A TLS hello without a TLCP suite is refused with
// protocol_version, as by Server.
//
// The caller decides per connection: typically it has read the hello
// (ParseTLSClientHello), chosen TLCP for the site, and replays the bytes
// it read to the returned Conn.
func ServerForTLSHello(conn net.Conn, config *Config) *Conn {
	c := Server(conn, config)
	c.acceptTLSHello = true
	return c
}

// ClientWithHello returns a client-side TLCP connection over conn whose
// handshake sends hello - a whole ClientHello handshake message, header
// included - byte for byte in a record of version recordVersion, and then
// continues as a TLCP client with whatever the server answers in TLCP
// 1.1. It plays a GM-capable TLS client: hello is typically in TLS form
// (client_version 0x0303) and offers TLCP suites among TLS ones. The
// server may choose only a TLCP suite the hello offers; the cipher
// suites, server name and ALPN protocols are those of hello, the rest
// (roots, server name to verify, client certificates, session cache)
// comes from config.
//
// It exists to test and probe servers. hello's random is used as given:
// a caller that replays a fixed hello gets a fixed client random.
func ClientWithHello(conn net.Conn, config *Config, recordVersion uint16, hello []byte) (*Conn, error) {
	var m clientHelloMsg
	if len(hello) > maxHandshake+4 || !m.unmarshal(slices.Clone(hello)) {
		return nil, errors.New("tlcp: the hello to send is not a well-formed ClientHello")
	}
	if len(TLCPSuitesIn(m.cipherSuites)) == 0 {
		return nil, errors.New("tlcp: the hello to send offers no TLCP cipher suite")
	}
	if recordVersion>>8 != 3 && recordVersion != VersionTLCP {
		return nil, fmt.Errorf("tlcp: record version %#04x is neither TLS nor TLCP", recordVersion)
	}
	c := Client(conn, config)
	c.helloOverride = &m
	c.plainVers = recordVersion
	return c, nil
}

// TLCPSuitesIn returns the TLCP cipher suites among suites, in their
// order: the suites a ClientHello offers that make it GM-capable.
func TLCPSuitesIn(suites []uint16) []uint16 {
	var out []uint16
	for _, id := range suites {
		if cipherSuiteByID(id) != nil && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// TLSClientHello is what ParseTLSClientHello read from a ClientHello.
type TLSClientHello struct {
	// RecordVersion is the version of the first record that carried the
	// hello: 0x0301 to 0x0303 for TLS clients, 0x0101 for TLCP.
	RecordVersion uint16
	// Version is the hello's client_version (legacy_version in TLS 1.3).
	Version uint16
	// CipherSuites are the suites offered, in the client's order.
	CipherSuites []uint16
	// TLCPSuites are the TLCP suites among CipherSuites.
	TLCPSuites []uint16
	// ServerName is the SNI host name, if any.
	ServerName string
	// ALPNProtocols are the protocols offered, if any.
	ALPNProtocols []string
	// Length is how many bytes of data the hello's records took.
	Length int
}

// TLSForm reports whether the hello is in TLS form (client_version 3.x):
// the hello of a GM-capable TLS client when it offers TLCP suites.
func (h *TLSClientHello) TLSForm() bool { return h.Version>>8 == 3 }

// GMCapable reports whether the hello is a TLS ClientHello that offers a
// TLCP suite, which ServerForTLSHello takes and Server refuses with
// handshake_failure.
func (h *TLSClientHello) GMCapable() bool { return h.TLSForm() && len(h.TLCPSuites) > 0 }

// Limits of ParseTLSClientHello: those the server applies to a hello.
const maxHelloParseRecords = 64

// ParseTLSClientHello reads the ClientHello carried by the handshake
// records at the start of data (the first bytes a client sent, as a
// server peeks them) and returns what a server decides on. Bytes past the
// hello's last record are ignored. It refuses, with an error, what the
// TLCP server refuses: anything that is not a well-formed ClientHello of
// at most 64 KiB in at most 64 handshake records of one version. It only
// reads data.
func ParseTLSClientHello(data []byte) (*TLSClientHello, error) {
	var msg []byte
	var recordVers uint16
	off, want := 0, -1
	for records := 0; want < 0 || len(msg) < want; records++ {
		if records == maxHelloParseRecords {
			return nil, fmt.Errorf("tlcp: ClientHello split into more than %d records", maxHelloParseRecords)
		}
		if len(data)-off < recordHeaderLen {
			return nil, errors.New("tlcp: ClientHello truncated")
		}
		hdr := data[off : off+recordHeaderLen]
		vers := uint16(hdr[1])<<8 | uint16(hdr[2])
		n := int(hdr[3])<<8 | int(hdr[4])
		switch {
		case recordType(hdr[0]) != recordTypeHandshake:
			return nil, fmt.Errorf("tlcp: record of type %d where a ClientHello was expected", hdr[0])
		case records == 0:
			recordVers = vers
		case vers != recordVers:
			return nil, errors.New("tlcp: the records of a ClientHello change version")
		}
		if n == 0 || n > maxPlaintext {
			return nil, fmt.Errorf("tlcp: handshake record of %d bytes", n)
		}
		off += recordHeaderLen
		if len(data)-off < n {
			return nil, errors.New("tlcp: ClientHello truncated")
		}
		msg = append(msg, data[off:off+n]...)
		off += n
		if want < 0 && len(msg) >= 4 {
			if msg[0] != typeClientHello {
				return nil, fmt.Errorf("tlcp: the first handshake message is a %s", messageName(msg[0]))
			}
			body := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
			if body > maxHandshake {
				return nil, fmt.Errorf("tlcp: ClientHello of %d bytes exceeds the limit of %d", body, maxHandshake)
			}
			want = 4 + body
		}
	}
	if len(msg) != want {
		return nil, errors.New("tlcp: a record holds more than the ClientHello")
	}
	var m clientHelloMsg
	if !m.unmarshal(msg) {
		return nil, errors.New("tlcp: malformed ClientHello")
	}
	return &TLSClientHello{
		RecordVersion: recordVers,
		Version:       m.vers,
		CipherSuites:  m.cipherSuites,
		TLCPSuites:    TLCPSuitesIn(m.cipherSuites),
		ServerName:    m.serverName,
		ALPNProtocols: m.alpnProtocols,
		Length:        off,
	}, nil
}

// offersRenegotiationInfo reports whether a hello asks for RFC 5746's
// renegotiation_info in the ServerHello: by the extension or the SCSV.
func (m *clientHelloMsg) offersRenegotiationInfo() bool {
	return slices.Contains(m.extensionTypes, extensionRenegotiationInfo) || slices.Contains(m.cipherSuites, scsvRenegotiation)
}

// useHelloOverride makes the hello of a ClientWithHello client the one to
// send, and offers the cached session it names, if any.
func (hs *clientHandshakeState) useHelloOverride() error {
	c := hs.c
	cfg := c.config
	hs.hello = c.helloOverride
	if cfg.ClientSessionCache != nil && !cfg.SessionsDisabled {
		hs.sessionKey = clientSessionCacheKey(c.conn.RemoteAddr(), cfg)
		if s, ok := cfg.ClientSessionCache.Get(hs.sessionKey); ok && s != nil && len(s.sessionID) > 0 && bytes.Equal(s.sessionID, hs.hello.sessionID) && hs.canResume(s) {
			hs.session = s
		}
	}
	return nil
}
