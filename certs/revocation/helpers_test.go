package revocation

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/internal/testpki"
	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

// testCA is a CA of one key type that issues client certificates, CRLs
// and OCSP responses.
type testCA struct {
	cert *smx509.Certificate
	key  crypto.Signer
}

// newCA returns an SM2 CA (from testpki) or an ECDSA P-256 one.
func newCA(t testing.TB, kind string) *testCA {
	t.Helper()
	if kind == "sm2" {
		ca := testpki.NewCA(t, "revocation test SM2 CA")
		return &testCA{cert: ca.Cert, key: ca.Key}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &smx509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "revocation test ECDSA CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              smx509.KeyUsageCertSign | smx509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return &testCA{cert: sign(t, tmpl, tmpl, key.Public(), key), key: key}
}

func sign(t testing.TB, tmpl, parent *smx509.Certificate, pub crypto.PublicKey, key crypto.Signer) *smx509.Certificate {
	t.Helper()
	der, err := smx509.CreateCertificate(rand.Reader, tmpl, parent, pub, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := smx509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// intermediate issues a CA certificate named cn under ca.
func (ca *testCA) intermediate(t testing.TB, cn string) *testCA {
	t.Helper()
	key := ca.newKey(t)
	tmpl := &smx509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              smx509.KeyUsageCertSign | smx509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return &testCA{cert: sign(t, tmpl, ca.cert, key.Public(), ca.key), key: key}
}

// newKey makes a key of the CA's kind.
func (ca *testCA) newKey(t testing.TB) crypto.Signer {
	t.Helper()
	var k crypto.Signer
	var err error
	if sm2.IsSM2PublicKey(ca.cert.PublicKey) {
		k, err = sm2.GenerateKey(rand.Reader)
	} else {
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// client issues a client certificate whose AIA names ocspURL (if any).
func (ca *testCA) client(t testing.TB, cn, ocspURL string) *smx509.Certificate {
	t.Helper()
	tmpl := testpki.Template(cn, nil, false)
	if ocspURL != "" {
		tmpl.OCSPServer = []string{ocspURL}
	}
	return sign(t, tmpl, ca.cert, ca.newKey(t).Public(), ca.key)
}

// responderCert issues a delegated OCSP responder certificate.
func (ca *testCA) responderCert(t testing.TB, ocspSigning bool) (*smx509.Certificate, crypto.Signer) {
	t.Helper()
	key := ca.newKey(t)
	tmpl := testpki.Template("revocation test OCSP responder", nil, false)
	tmpl.ExtKeyUsage = nil
	if ocspSigning {
		tmpl.ExtKeyUsage = []smx509.ExtKeyUsage{smx509.ExtKeyUsageOCSPSigning}
	}
	return sign(t, tmpl, ca.cert, key.Public(), ca.key), key
}

// crl makes a DER CRL revoking serials, valid from thisUpdate to
// nextUpdate.
func (ca *testCA) crl(t testing.TB, number int64, thisUpdate, nextUpdate time.Time, serials ...*big.Int) []byte {
	t.Helper()
	tmpl := &smx509.RevocationList{Number: big.NewInt(number), ThisUpdate: thisUpdate, NextUpdate: nextUpdate}
	for _, s := range serials {
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries, smx509.RevocationListEntry{
			SerialNumber: s, RevocationTime: thisUpdate.Add(-time.Minute), ReasonCode: int(ReasonKeyCompromise)})
	}
	der, err := smx509.CreateRevocationList(rand.Reader, tmpl, ca.cert, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// signWith signs msg as a certificate or OCSP response of key's kind is
// signed, returning the signature and its algorithm's OID.
func signWith(t testing.TB, key crypto.Signer, msg []byte) ([]byte, asn1.ObjectIdentifier) {
	t.Helper()
	if sm2.IsSM2PublicKey(key.Public()) {
		sig, err := key.Sign(rand.Reader, msg, sm2.DefaultSM2SignerOpts)
		if err != nil {
			t.Fatal(err)
		}
		return sig, asn1.ObjectIdentifier{1, 2, 156, 10197, 1, 501}
	}
	d := sha256.Sum256(msg)
	sig, err := key.Sign(rand.Reader, d[:], crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	return sig, asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 2}
}

// ocspAnswer is what the test responder says about one certificate.
type ocspAnswer struct {
	status                 Status
	revokedAt              time.Time
	reason                 Reason
	thisUpdate, nextUpdate time.Time
}

// ocspResponseDER builds a signed BasicOCSPResponse for id, signed by
// signer (the CA, or a delegated responder whose certificate is
// included).
func ocspResponseDER(t testing.TB, signer *smx509.Certificate, key crypto.Signer, include bool, id certID, a ocspAnswer) []byte {
	t.Helper()
	var tbs cryptobyte.Builder
	tbs.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1(tagExplicit1, func(b *cryptobyte.Builder) { b.AddBytes(signer.RawSubject) })
		b.AddASN1GeneralizedTime(a.thisUpdate.UTC())
		b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
			b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
				id.marshal(b)
				switch a.status {
				case StatusGood:
					b.AddASN1(cbasn1.Tag(0).ContextSpecific(), func(*cryptobyte.Builder) {})
				case StatusRevoked:
					b.AddASN1(cbasn1.Tag(1).Constructed().ContextSpecific(), func(b *cryptobyte.Builder) {
						b.AddASN1GeneralizedTime(a.revokedAt.UTC())
						b.AddASN1(tagExplicit0, func(b *cryptobyte.Builder) { b.AddASN1Enum(int64(a.reason)) })
					})
				default:
					b.AddASN1(cbasn1.Tag(2).ContextSpecific(), func(*cryptobyte.Builder) {})
				}
				b.AddASN1GeneralizedTime(a.thisUpdate.UTC())
				if !a.nextUpdate.IsZero() {
					b.AddASN1(tagExplicit0, func(b *cryptobyte.Builder) { b.AddASN1GeneralizedTime(a.nextUpdate.UTC()) })
				}
			})
		})
	})
	tbsDER := tbs.BytesOrPanic()
	sig, sigOID := signWith(t, key, tbsDER)
	var basic cryptobyte.Builder
	basic.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddBytes(tbsDER)
		b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { b.AddASN1ObjectIdentifier(sigOID) })
		b.AddASN1BitString(sig)
		if include {
			b.AddASN1(tagExplicit0, func(b *cryptobyte.Builder) {
				b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { b.AddBytes(signer.Raw) })
			})
		}
	})
	return wrapBasic(basic.BytesOrPanic())
}

// wrapBasic wraps a BasicOCSPResponse into a successful OCSPResponse.
func wrapBasic(basic []byte) []byte {
	var b cryptobyte.Builder
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1Enum(ocspSuccessful)
		b.AddASN1(tagExplicit0, func(b *cryptobyte.Builder) {
			b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
				b.AddASN1ObjectIdentifier(oidOCSPBasic)
				b.AddASN1OctetString(basic)
			})
		})
	})
	return b.BytesOrPanic()
}

// statusOnly is an OCSPResponse with an unsuccessful status.
func statusOnly(status int64) []byte {
	var b cryptobyte.Builder
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { b.AddASN1Enum(status) })
	return b.BytesOrPanic()
}

// parseTestRequest reads the CertID of an OCSPRequest with encoding/asn1,
// independently of the package's own encoder.
func parseTestRequest(der []byte) (certID, error) {
	var req struct {
		TBS struct {
			List []struct {
				ID struct {
					Alg      pkix.AlgorithmIdentifier
					NameHash []byte
					KeyHash  []byte
					Serial   *big.Int
				}
			}
		}
	}
	if _, err := asn1.Unmarshal(der, &req); err != nil {
		return certID{}, err
	}
	if len(req.TBS.List) != 1 {
		return certID{}, asn1.StructuralError{Msg: "want one request"}
	}
	id := req.TBS.List[0].ID
	return certID{hashOID: id.Alg.Algorithm, issuerNameHash: id.NameHash, issuerKey: id.KeyHash, serial: id.Serial}, nil
}

// responder is a test OCSP responder on loopback that answers from a
// table of serials, signed by the CA (or by delegate when set).
type responder struct {
	t        testing.TB
	ca       *testCA
	srv      *httptest.Server
	mu       sync.Mutex
	answers  map[string]ocspAnswer
	delegate *smx509.Certificate
	dkey     crypto.Signer
	// raw, when set, is sent instead of a built response.
	raw      []byte
	down     atomic.Bool
	requests atomic.Int64
}

func newResponder(t testing.TB, ca *testCA) *responder {
	r := &responder{t: t, ca: ca, answers: map[string]ocspAnswer{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *responder) set(serial *big.Int, a ocspAnswer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers[serialKey(serial)] = a
}

func (r *responder) serve(w http.ResponseWriter, req *http.Request) {
	r.requests.Add(1)
	if r.down.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	body := make([]byte, 4096)
	n, _ := req.Body.Read(body)
	id, err := parseTestRequest(body[:n])
	if err != nil || req.Header.Get("Content-Type") != "application/ocsp-request" {
		w.Write(statusOnly(ocspMalformedRequest))
		return
	}
	r.mu.Lock()
	a, ok := r.answers[serialKey(id.serial)]
	raw, delegate, dkey := r.raw, r.delegate, r.dkey
	r.mu.Unlock()
	if raw != nil {
		w.Write(raw)
		return
	}
	if !ok {
		a = ocspAnswer{status: StatusUnknown, thisUpdate: time.Now().Add(-time.Minute), nextUpdate: time.Now().Add(time.Hour)}
	}
	w.Header().Set("Content-Type", "application/ocsp-response")
	if delegate != nil {
		w.Write(ocspResponseDER(r.t, delegate, dkey, true, id, a))
		return
	}
	w.Write(ocspResponseDER(r.t, r.ca.cert, r.ca.key, false, id, a))
}

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// recorder is an Observer that remembers what it heard.
type recorder struct {
	mu      sync.Mutex
	states  []string
	decided []Result
	refused []bool
}

func (r *recorder) SourceChanged(source string, st SourceState, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.states = append(r.states, source+" "+st.String())
}

func (r *recorder) Decided(res Result, refused bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.decided = append(r.decided, res)
	r.refused = append(r.refused, refused)
}

func (r *recorder) lastState() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.states) == 0 {
		return ""
	}
	return r.states[len(r.states)-1]
}
