package tls13

import (
	"crypto/cipher"
	"crypto/hmac"
	"hash"

	smcipher "github.com/emmansun/gmsm/cipher"
	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/sm4"
	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/crypto/hkdf"

	"github.com/gmgate/gmgate/tlcp"
)

// Cipher suites of RFC 8998 §2.
const (
	TLS_SM4_GCM_SM3 uint16 = 0x00C6
	TLS_SM4_CCM_SM3 uint16 = 0x00C7
)

// DefaultCipherSuites are the suites enabled when Config.CipherSuites is
// nil, in the server's order of preference: GCM first, being the faster.
var DefaultCipherSuites = []uint16{TLS_SM4_GCM_SM3, TLS_SM4_CCM_SM3}

// CipherSuiteName returns the RFC 8998 name of a suite, or "0xXXXX".
func CipherSuiteName(id uint16) string {
	switch id {
	case TLS_SM4_GCM_SM3:
		return "TLS_SM4_GCM_SM3"
	case TLS_SM4_CCM_SM3:
		return "TLS_SM4_CCM_SM3"
	}
	const hexDigits = "0123456789ABCDEF"
	return "0x" + string([]byte{hexDigits[id>>12], hexDigits[id>>8&15], hexDigits[id>>4&15], hexDigits[id&15]})
}

const (
	keyLen  = 16 // SM4
	ivLen   = 12 // RFC 8998 §3.1: 12-octet nonce for both modes
	tagLen  = 16
	hashLen = sm3.Size
)

// cipherSuite is one row of the suite table: both suites share SM3 and SM4
// and differ in the AEAD mode.
type cipherSuite struct {
	id   uint16
	aead func(key []byte) (cipher.AEAD, error)
}

var cipherSuites = []*cipherSuite{
	{TLS_SM4_GCM_SM3, aeadSM4GCM},
	{TLS_SM4_CCM_SM3, aeadSM4CCM},
}

func cipherSuiteByID(id uint16) *cipherSuite {
	for _, s := range cipherSuites {
		if s.id == id {
			return s
		}
	}
	return nil
}

// aeadSM4GCM is the record protection of TLS_SM4_GCM_SM3: the same
// constant-time kernel, chosen per CPU, as TLCP's GCM records.
func aeadSM4GCM(key []byte) (cipher.AEAD, error) {
	return tlcp.NewSM4GCM(key)
}

func aeadSM4CCM(key []byte) (cipher.AEAD, error) {
	b, err := sm4.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := smcipher.NewCCM(b)
	if err != nil {
		return nil, err
	}
	return &copyingSeal{AEAD: aead}, nil
}

// copyingSeal seals from a copy of the plaintext: gmsm v0.44.1's CCM
// computes its tag over the plaintext after encrypting into the output,
// so sealing in place (as the record layer does) tags the ciphertext and
// no peer can open the record. An AEAD serves one direction of one
// connection, under that direction's lock, so its scratch buffer is not
// shared.
type copyingSeal struct {
	cipher.AEAD
	scratch []byte
}

func (a *copyingSeal) Seal(dst, nonce, plaintext, additionalData []byte) []byte {
	a.scratch = append(a.scratch[:0], plaintext...)
	return a.AEAD.Seal(dst, nonce, a.scratch, additionalData)
}

// Key schedule (RFC 8446 §7.1) with SM3 as the hash (RFC 8998 §3.1).

// expandLabel is HKDF-Expand-Label(secret, label, context, length).
func expandLabel(secret []byte, label string, context []byte, length int) []byte {
	var b cryptobyte.Builder
	b.AddUint16(uint16(length))
	b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddBytes([]byte("tls13 "))
		b.AddBytes([]byte(label))
	})
	b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(context) })
	info := b.BytesOrPanic()
	out := make([]byte, length)
	if _, err := hkdf.Expand(sm3.New, secret, info).Read(out); err != nil {
		// Only a length beyond 255*32 fails, which no caller asks for.
		panic("tls13: HKDF-Expand-Label: " + err.Error())
	}
	return out
}

// extract is HKDF-Extract(salt, ikm), with zero inputs as RFC 8446 §7.1
// writes them.
func extract(ikm, salt []byte) []byte {
	if ikm == nil {
		ikm = make([]byte, hashLen)
	}
	if salt == nil {
		salt = make([]byte, hashLen)
	}
	return hkdf.Extract(sm3.New, ikm, salt)
}

// deriveSecret is Derive-Secret(secret, label, messages), given the
// transcript hash (nil for the empty transcript).
func deriveSecret(secret []byte, label string, transcript hash.Hash) []byte {
	var sum []byte
	if transcript == nil {
		h := sm3.New()
		sum = h.Sum(nil)
	} else {
		sum = transcript.Sum(nil)
	}
	return expandLabel(secret, label, sum, hashLen)
}

// Labels of the key schedule.
const (
	labelResumptionBinder  = "res binder"
	labelClientHandshake   = "c hs traffic"
	labelServerHandshake   = "s hs traffic"
	labelClientApplication = "c ap traffic"
	labelServerApplication = "s ap traffic"
	labelExporterMaster    = "exp master"
	labelResumptionMaster  = "res master"
	labelDerived           = "derived"
	labelFinished          = "finished"
	labelTrafficUpdate     = "traffic upd"
	labelResumption        = "resumption"
)

// earlySecret is the first stage: psk is nil for a full handshake.
func earlySecret(psk []byte) []byte { return extract(psk, nil) }

// handshakeSecret mixes the (EC)DHE shared secret in.
func handshakeSecret(early, shared []byte) []byte {
	return extract(shared, deriveSecret(early, labelDerived, nil))
}

// masterSecret is the last stage.
func masterSecret(hs []byte) []byte {
	return extract(nil, deriveSecret(hs, labelDerived, nil))
}

// trafficKey derives the AEAD key and IV of a traffic secret.
func trafficKey(secret []byte) (key, iv []byte) {
	return expandLabel(secret, "key", nil, keyLen), expandLabel(secret, "iv", nil, ivLen)
}

// nextTrafficSecret is the secret after a KeyUpdate (RFC 8446 §7.2).
func nextTrafficSecret(secret []byte) []byte {
	return expandLabel(secret, labelTrafficUpdate, nil, hashLen)
}

// finishedMAC computes verify_data for a Finished message.
func finishedMAC(baseKey []byte, transcript hash.Hash) []byte {
	key := expandLabel(baseKey, labelFinished, nil, hashLen)
	m := hmac.New(sm3.New, key)
	m.Write(transcript.Sum(nil))
	return m.Sum(nil)
}

// resumptionPSK derives a ticket's PSK from the resumption master secret.
func resumptionPSK(resumptionMaster, nonce []byte) []byte {
	return expandLabel(resumptionMaster, labelResumption, nonce, hashLen)
}

// binderKey derives the key of PSK binders for resumption PSKs.
func binderKey(early []byte) []byte {
	return deriveSecret(early, labelResumptionBinder, nil)
}
