package tlcp

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/sm3"
)

// wireRecorder keeps what a client wrote and what it read.
type wireRecorder struct {
	net.Conn
	mu      sync.Mutex
	written bytes.Buffer
	read    bytes.Buffer
}

func (r *wireRecorder) Write(b []byte) (int, error) {
	r.mu.Lock()
	r.written.Write(b)
	r.mu.Unlock()
	return r.Conn.Write(b)
}

func (r *wireRecorder) Read(b []byte) (int, error) {
	n, err := r.Conn.Read(b)
	r.mu.Lock()
	r.read.Write(b[:n])
	r.mu.Unlock()
	return n, err
}

// plainHandshakeMessages returns the handshake messages of a record
// stream up to its first ChangeCipherSpec (after which they are
// encrypted), each with its four-byte header.
func plainHandshakeMessages(t *testing.T, stream []byte) [][]byte {
	t.Helper()
	var hs []byte
	for len(stream) >= recordHeaderLen {
		typ := recordType(stream[0])
		n := int(stream[3])<<8 | int(stream[4])
		if len(stream) < recordHeaderLen+n {
			t.Fatalf("truncated record")
		}
		if typ == recordTypeChangeCipherSpec {
			break
		}
		if typ == recordTypeHandshake {
			hs = append(hs, stream[recordHeaderLen:recordHeaderLen+n]...)
		}
		stream = stream[recordHeaderLen+n:]
	}
	var msgs [][]byte
	for len(hs) >= 4 {
		n := 4 + (int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3]))
		msgs = append(msgs, hs[:n])
		hs = hs[n:]
	}
	return msgs
}

// TestClientRawCertificateVerify checks what the client signs in
// CertificateVerify: under ClientRawCertificateVerify the handshake
// messages themselves (GmSSL's form), which the server's raw-form check
// accepts and its hash-form check rejects; by default their SM3 hash, the
// other way round. The server accepts both, so both handshakes complete.
func TestClientRawCertificateVerify(t *testing.T) {
	p := getPKI(t)
	pub := &p.client.SignKey.(*sm2.PrivateKey).PublicKey
	for _, tc := range []struct {
		name  string
		raw   bool
		suite uint16
	}{
		{"raw/ECC", true, ECC_SM4_GCM_SM3},
		{"raw/ECDHE", true, ECDHE_SM4_CBC_SM3},
		{"hash/ECC", false, ECC_SM4_GCM_SM3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ccfg := clientConfig(t)
			ccfg.CipherSuites = []uint16{tc.suite}
			ccfg.Certificates = []Certificate{p.client}
			ccfg.ClientRawCertificateVerify = tc.raw
			scfg := serverConfig(t)
			scfg.ClientAuth = RequireAndVerifyClientCert

			c, s := localPipe(t)
			rec := &wireRecorder{Conn: c}
			client, server := Client(rec, ccfg), Server(s, scfg)
			defer client.Close()
			defer server.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			serr := make(chan error, 1)
			go func() { serr <- server.HandshakeContext(ctx) }()
			if err := client.HandshakeContext(ctx); err != nil {
				t.Fatalf("client: %v", err)
			}
			if err := <-serr; err != nil {
				t.Fatalf("server: %v", err)
			}

			rec.mu.Lock()
			sent := plainHandshakeMessages(t, rec.written.Bytes())
			got := plainHandshakeMessages(t, rec.read.Bytes())
			rec.mu.Unlock()
			// Client: ClientHello, Certificate, ClientKeyExchange,
			// CertificateVerify. Server: ServerHello ... ServerHelloDone.
			if len(sent) != 4 || sent[3][0] != typeCertificateVerify || len(got) == 0 || got[len(got)-1][0] != typeServerHelloDone {
				t.Fatalf("unexpected flights: %d messages sent, %d read", len(sent), len(got))
			}
			var transcript []byte
			transcript = append(transcript, sent[0]...)
			for _, m := range got {
				transcript = append(transcript, m...)
			}
			transcript = append(transcript, sent[1]...)
			transcript = append(transcript, sent[2]...)
			var cv certificateVerifyMsg
			if !cv.unmarshal(sent[3]) {
				t.Fatal("CertificateVerify does not parse")
			}
			digest := sm3.Sum(transcript)
			rawOK := verifyMessage(pub, transcript, cv.signature)
			hashOK := verifyMessage(pub, digest[:], cv.signature)
			if rawOK != tc.raw || hashOK == tc.raw {
				t.Fatalf("signature verifies over the raw transcript: %v, over its hash: %v; want raw %v", rawOK, hashOK, tc.raw)
			}
			if !verifyCertificateVerify(pub, digest[:], transcript, cv.signature) {
				t.Fatal("the server's check rejects it")
			}
		})
	}
}

func TestSetClientProfile(t *testing.T) {
	var c Config
	if err := c.SetClientProfile(ProfileGmSSL); err != nil {
		t.Fatal(err)
	}
	if !c.ClientSignCertOnly || !c.ClientECDHEParamsAsVector || !c.ClientRawCertificateVerify {
		t.Fatal("gmssl profile left a switch off")
	}
	if err := c.SetClientProfile(ProfileStandard); err != nil {
		t.Fatal(err)
	}
	if c.ClientSignCertOnly || c.ClientECDHEParamsAsVector || c.ClientRawCertificateVerify {
		t.Fatal("standard profile left a GmSSL switch on")
	}
	if err := c.SetClientProfile("tongsuo"); err == nil {
		t.Fatal("unknown profile accepted")
	}
}

// TestGmSSLProfileHandshakes: a client under the gmssl profile completes
// mutually authenticated handshakes with this package's server in every
// suite, which accepts each of the three GmSSL forms.
func TestGmSSLProfileHandshakes(t *testing.T) {
	p := getPKI(t)
	for _, suite := range allSuites {
		t.Run(CipherSuiteName(suite), func(t *testing.T) {
			ccfg := clientConfig(t)
			ccfg.CipherSuites = []uint16{suite}
			ccfg.Certificates = []Certificate{p.client}
			if err := ccfg.SetClientProfile(ProfileGmSSL); err != nil {
				t.Fatal(err)
			}
			scfg := serverConfig(t)
			scfg.ClientAuth = RequireAndVerifyClientCert
			_, server, cerr, serr := handshakePair(t, ccfg, scfg)
			if cerr != nil || serr != nil {
				t.Fatalf("client %v, server %v", cerr, serr)
			}
			st := server.ConnectionState()
			want := 1 // the signing certificate alone with the ECC suites
			if cipherSuiteByID(suite).ecdhe {
				want = 2
			}
			if len(st.PeerCertificates) != want || len(st.VerifiedChains) == 0 {
				t.Fatalf("server got %d client certificates (want %d), %d verified chains", len(st.PeerCertificates), want, len(st.VerifiedChains))
			}
		})
	}
}
