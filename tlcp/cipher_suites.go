package tlcp

import (
	"crypto/cipher"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"strings"

	"github.com/emmansun/gmsm/sm4"
	"github.com/gmgate/gmgate/internal/cpufeat"
	"github.com/gmgate/gmgate/tlcp/internal/sm4cbc"
	"github.com/gmgate/gmgate/tlcp/internal/sm4gcm"
)

// Cipher suites of GB/T 38636-2020 that use SM2 certificates.
const (
	ECDHE_SM4_CBC_SM3 uint16 = 0xE011
	ECDHE_SM4_GCM_SM3 uint16 = 0xE051
	ECC_SM4_CBC_SM3   uint16 = 0xE013
	ECC_SM4_GCM_SM3   uint16 = 0xE053
)

// DefaultCipherSuites is the preference order used when Config.CipherSuites
// is nil: the ECC suites (which every peer supports) before ECDHE, and
// within each the mode that is faster on this CPU first (see
// PreferredCipherSuites): GCM where the CPU has AES or SM4 instructions
// and carry-less multiplication, CBC elsewhere. A client offers the ECDHE
// suites only when it has an encryption key able to take part in SM2 key
// agreement.
var DefaultCipherSuites = PreferredCipherSuites(cpufeat.Current())

// PreferredCipherSuites is the default order for the CPU of plan: ECC
// before ECDHE, and GCM before CBC when plan.PreferGCM, CBC before GCM
// otherwise.
func PreferredCipherSuites(plan *cpufeat.Plan) []uint16 {
	if plan.PreferGCM {
		return []uint16{ECC_SM4_GCM_SM3, ECC_SM4_CBC_SM3, ECDHE_SM4_GCM_SM3, ECDHE_SM4_CBC_SM3}
	}
	return []uint16{ECC_SM4_CBC_SM3, ECC_SM4_GCM_SM3, ECDHE_SM4_CBC_SM3, ECDHE_SM4_GCM_SM3}
}

// cpuPlan is the plan record protection follows; tests replace it to
// take the paths of other CPUs.
var cpuPlan = cpufeat.Current

// CipherSuite describes one supported suite.
type CipherSuite struct {
	ID   uint16
	Name string
	// ECDHE is true for the suites with SM2 key agreement, which need the
	// client's encryption certificate.
	ECDHE bool
	// AEAD is true for the SM4-GCM suites.
	AEAD bool
}

type cipherSuite struct {
	id    uint16
	name  string
	ecdhe bool
	aead  bool
	// key block lengths
	macLen, keyLen, ivLen int
}

const (
	sm3Size   = 32
	sm4Key    = 16
	sm4Block  = 16
	gcmSalt   = 4
	gcmNonce  = 8
	gcmTagLen = 16
)

var cipherSuites = []*cipherSuite{
	{ECC_SM4_GCM_SM3, "ECC_SM4_GCM_SM3", false, true, 0, sm4Key, gcmSalt},
	{ECC_SM4_CBC_SM3, "ECC_SM4_CBC_SM3", false, false, sm3Size, sm4Key, sm4Block},
	{ECDHE_SM4_GCM_SM3, "ECDHE_SM4_GCM_SM3", true, true, 0, sm4Key, gcmSalt},
	{ECDHE_SM4_CBC_SM3, "ECDHE_SM4_CBC_SM3", true, false, sm3Size, sm4Key, sm4Block},
}

func cipherSuiteByID(id uint16) *cipherSuite {
	for _, s := range cipherSuites {
		if s.id == id {
			return s
		}
	}
	return nil
}

// CipherSuites returns the suites this package implements.
func CipherSuites() []*CipherSuite {
	out := make([]*CipherSuite, 0, len(cipherSuites))
	for _, s := range cipherSuites {
		out = append(out, &CipherSuite{ID: s.id, Name: s.name, ECDHE: s.ecdhe, AEAD: s.aead})
	}
	return out
}

// CipherSuiteName returns the GB/T 38636 name of a suite, or its value in
// hex when it is not one of ours.
func CipherSuiteName(id uint16) string {
	if s := cipherSuiteByID(id); s != nil {
		return s.name
	}
	const hexDigits = "0123456789ABCDEF"
	return "0x" + string([]byte{hexDigits[id>>12], hexDigits[id>>8&15], hexDigits[id>>4&15], hexDigits[id&15]})
}

// CipherSuiteByName returns the ID of a suite given its GB/T 38636 name
// (ECC_SM4_GCM_SM3) or its OpenSSL/Tongsuo style name (ECC-SM2-SM4-GCM-SM3),
// case-insensitively.
func CipherSuiteByName(name string) (uint16, bool) {
	n := strings.ToUpper(strings.TrimSpace(name))
	n = strings.ReplaceAll(n, "-", "_")
	n = strings.Replace(n, "_SM2_", "_", 1)
	n = strings.Replace(n, "_WITH_", "_", 1)
	for _, s := range cipherSuites {
		if s.name == n {
			return s.id, true
		}
	}
	return 0, false
}

// keyBlockLen is the length of the key block this suite uses. The CBC
// suites would partition 128 bytes, but their last 32 (the "IVs") are
// never used, since every record carries an explicit IV; like GmSSL, only
// the 96 bytes in use are derived (the PRF output is a stream, so the
// prefix is the same).
func (s *cipherSuite) keyBlockLen() int {
	if !s.aead {
		return 2 * (s.macLen + s.keyLen)
	}
	return 2 * (s.macLen + s.keyLen + s.ivLen)
}

// newCiphers builds the read and write record protection from a key block.
func (s *cipherSuite) newCiphers(keyBlock []byte, isClient bool) (read, write recordCipher, err error) {
	kb := keyBlock
	clientMAC, kb := kb[:s.macLen], kb[s.macLen:]
	serverMAC, kb := kb[:s.macLen], kb[s.macLen:]
	clientKey, kb := kb[:s.keyLen], kb[s.keyLen:]
	serverKey, kb := kb[:s.keyLen], kb[s.keyLen:]
	var clientIV, serverIV []byte
	if s.aead {
		clientIV, kb = kb[:s.ivLen], kb[s.ivLen:]
		serverIV = kb[:s.ivLen]
	}
	mk := func(mac, key, iv []byte, sealing bool) (recordCipher, error) {
		if s.aead {
			return newGCMRecord(key, iv)
		}
		return newCBCRecord(key, mac, sealing)
	}
	c, err := mk(clientMAC, clientKey, clientIV, isClient)
	if err != nil {
		return nil, nil, err
	}
	sv, err := mk(serverMAC, serverKey, serverIV, !isClient)
	if err != nil {
		return nil, nil, err
	}
	if isClient {
		return sv, c, nil
	}
	return c, sv, nil
}

// recordCipher protects records in one direction.
type recordCipher interface {
	// seal appends to out a whole protected record (header included) for
	// payload, of content type typ, under sequence number seq.
	seal(out []byte, typ recordType, payload []byte, seq uint64, rand io.Reader) ([]byte, error)
	// open checks and decrypts a record in place and returns its plaintext,
	// which aliases record. record includes the 5-byte header.
	open(record []byte, seq uint64) ([]byte, error)
}

// batchSealer is a recordCipher that seals several records at once faster
// than one after the other.
type batchSealer interface {
	// sealBatch seals a prefix of data as one or more records under
	// sequence numbers seq, seq+1, ... and returns how many bytes of data
	// and how many records it used.
	sealBatch(out []byte, typ recordType, data []byte, seq uint64, rand io.Reader) ([]byte, int, int, error)
}

var errBadRecordMAC = errors.New("tlcp: record authentication failed")

// recordHeader appends a record header for a fragment of length n.
func appendRecordHeader(out []byte, typ recordType, n int) []byte {
	return append(out, byte(typ), byte(VersionTLCP>>8), byte(VersionTLCP&0xff), byte(n>>8), byte(n))
}

// additionalData writes seq || type || version || length: the MAC input
// prefix of the CBC suites and the AEAD additional data of the GCM suites.
func additionalData(dst *[13]byte, seq uint64, typ byte, n int) {
	binary.BigEndian.PutUint64(dst[:8], seq)
	dst[8] = typ
	dst[9] = byte(VersionTLCP >> 8)
	dst[10] = byte(VersionTLCP & 0xff)
	dst[11] = byte(n >> 8)
	dst[12] = byte(n)
}

// NewSM4GCM returns SM4-GCM with a 12-byte nonce and a 16-byte tag for a
// 16-byte key, through the implementation internal/cpufeat chose for this
// CPU (the one GCM records use): for other SM4-GCM in gmgate, such as the
// session store's.
func NewSM4GCM(key []byte) (cipher.AEAD, error) {
	return sm4gcm.NewKernel(key, cpuPlan().GCM)
}

// gcmRecord is SM4-GCM record protection (RFC 5288 layout): an 8-byte
// explicit nonce on each record after the 4-byte implicit salt.
type gcmRecord struct {
	aead  cipher.AEAD
	nonce [gcmSalt + gcmNonce]byte
	ad    [13]byte
}

func newGCMRecord(key, salt []byte) (*gcmRecord, error) {
	aead, err := sm4gcm.NewKernel(key, cpuPlan().GCM)
	if err != nil {
		return nil, err
	}
	g := &gcmRecord{aead: aead}
	copy(g.nonce[:gcmSalt], salt)
	return g, nil
}

func (g *gcmRecord) seal(out []byte, typ recordType, payload []byte, seq uint64, _ io.Reader) ([]byte, error) {
	n := gcmNonce + len(payload) + gcmTagLen
	out = appendRecordHeader(out, typ, n)
	// The explicit nonce is the sequence number: unique per key, which is
	// all GCM needs.
	binary.BigEndian.PutUint64(g.nonce[gcmSalt:], seq)
	out = append(out, g.nonce[gcmSalt:]...)
	additionalData(&g.ad, seq, byte(typ), len(payload))
	return g.aead.Seal(out, g.nonce[:], payload, g.ad[:]), nil
}

func (g *gcmRecord) open(record []byte, seq uint64) ([]byte, error) {
	frag := record[recordHeaderLen:]
	if len(frag) < gcmNonce+gcmTagLen {
		return nil, errBadRecordMAC
	}
	// Peers of the OpenSSL family start the explicit nonce at a random
	// value, so it is read from the record, never assumed.
	copy(g.nonce[gcmSalt:], frag[:gcmNonce])
	ct := frag[gcmNonce:]
	additionalData(&g.ad, seq, record[0], len(ct)-gcmTagLen)
	pt, err := g.aead.Open(ct[:0], g.nonce[:], ct, g.ad[:])
	if err != nil {
		return nil, errBadRecordMAC
	}
	return pt, nil
}

// cbcRecord is SM4-CBC with HMAC-SM3, MAC-then-encrypt with an explicit
// random IV per record (TLS 1.1 layout).
type cbcRecord struct {
	// dec decrypts, enc encrypts: a record cipher serves one direction
	// and has only the one it needs. dec is re-armed with each record's
	// IV (SetIV) rather than made anew per record.
	dec ivBlockMode
	enc *sm4cbc.Encrypter
	mac hmacSM3
	ad  [13]byte
	iv  [sm4Block]byte
	sum [sm3Size]byte
	// frags and ends are sealBatch's scratch.
	frags [maxBatchRecords][]byte
	ends  [maxBatchRecords]int
}

// newCBCRecord returns the record cipher of one direction: for sealing
// (the key schedule of the encryption kernel) or for opening (gmsm's
// block, whose CBC decryption runs many blocks at once).
func newCBCRecord(key, macKey []byte, sealing bool) (*cbcRecord, error) {
	c := new(cbcRecord)
	c.mac.init(macKey)
	var err error
	if sealing {
		c.enc, err = sm4cbc.NewKernel(key, cpuPlan().CBC)
	} else {
		var block cipher.Block
		if block, err = sm4.NewCipher(key); err == nil {
			var zeroIV [sm4Block]byte
			dec := cipher.NewCBCDecrypter(block, zeroIV[:])
			var ok bool
			if c.dec, ok = dec.(ivBlockMode); !ok {
				c.dec = &freshCBC{block: block}
			}
		}
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// ivBlockMode is a CBC decrypter that takes a new IV: gmsm's and
// crypto/cipher's both do.
type ivBlockMode interface {
	cipher.BlockMode
	SetIV([]byte)
}

// freshCBC makes a decrypter per IV, for a block mode without SetIV.
type freshCBC struct {
	block cipher.Block
	cipher.BlockMode
}

func (f *freshCBC) SetIV(iv []byte) { f.BlockMode = cipher.NewCBCDecrypter(f.block, iv) }

func (c *cbcRecord) seal(out []byte, typ recordType, payload []byte, seq uint64, rand io.Reader) ([]byte, error) {
	start := len(out)
	out, err := c.appendUnencrypted(out, typ, payload, seq, rand)
	if err != nil {
		return nil, err
	}
	c.frags[0] = out[start+recordHeaderLen:]
	c.enc.EncryptChains(c.frags[:1])
	c.frags[0] = nil
	return out, nil
}

// appendUnencrypted appends a whole record for payload with its IV, MAC
// and padding, but not yet encrypted.
func (c *cbcRecord) appendUnencrypted(out []byte, typ recordType, payload []byte, seq uint64, rand io.Reader) ([]byte, error) {
	padLen := sm4Block - (len(payload)+sm3Size)%sm4Block // 1..16, the last byte included
	n := sm4Block + len(payload) + sm3Size + padLen
	out = appendRecordHeader(out, typ, n)
	out, frag := extend(out, n)
	if _, err := io.ReadFull(rand, frag[:sm4Block]); err != nil {
		return nil, err
	}
	body := frag[sm4Block:]
	copy(body, payload)
	additionalData(&c.ad, seq, byte(typ), len(payload))
	c.mac.Reset()
	c.mac.Write(c.ad[:])
	c.mac.Write(payload)
	c.mac.Sum(body[len(payload):len(payload)])
	pad := body[len(payload)+sm3Size:]
	for i := range pad {
		pad[i] = byte(padLen - 1)
	}
	return out, nil
}

// maxBatchRecords bounds the records sealBatch seals together.
const maxBatchRecords = 4

// minLaneRecord is the smallest record sealBatch cuts data into to fill
// the encrypter's lanes: below it, the cost of another record (its MAC
// finalization, header, IV and padding, and the peer's work to open it)
// outweighs the time saved.
const minLaneRecord = 4096

// batchRecords decides how sealBatch cuts n bytes for an encrypter with
// the given lanes: how many bytes go into this batch and into how many
// records. One lane (or little data) gives the usual full-size records.
func batchRecords(n, lanes int) (bytes, records int) {
	lanes = min(lanes, maxBatchRecords)
	bytes = min(n, lanes*maxPlaintext)
	records = max(1, (bytes+maxPlaintext-1)/maxPlaintext, min(lanes, bytes/minLaneRecord))
	if lanes == 1 {
		bytes, records = min(n, maxPlaintext), 1
	}
	return bytes, records
}

// sealBatch seals a prefix of data as several records (sequence numbers
// seq, seq+1, ...) whose CBC chains are encrypted side by side, each with
// its own IV, as fast as one: a bulk write is cut into records of equal
// size, up to one per lane of the encrypter. It returns how much of data
// it took and how many records it made.
func (c *cbcRecord) sealBatch(out []byte, typ recordType, data []byte, seq uint64, rand io.Reader) ([]byte, int, int, error) {
	total, records := batchRecords(len(data), c.enc.Lanes())
	if records == 1 {
		out, err := c.seal(out, typ, data[:total], seq, rand)
		return out, total, 1, err
	}
	start := len(out)
	// One allocation at most, so that the fragments stay where they are.
	out = slices.Grow(out, total+records*(recordHeaderLen+sm4Block+sm3Size+sm4Block))
	taken := 0
	for i := 0; i < records; i++ {
		m := total / records
		if i < total%records {
			m++
		}
		var err error
		if out, err = c.appendUnencrypted(out, typ, data[taken:taken+m], seq+uint64(i), rand); err != nil {
			return nil, 0, 0, err
		}
		taken += m
		c.ends[i] = len(out)
	}
	frags := c.frags[:records]
	prev := start
	for i := range frags {
		frags[i] = out[prev+recordHeaderLen : c.ends[i]]
		prev = c.ends[i]
	}
	c.enc.EncryptChains(frags)
	clear(frags)
	return out, total, records, nil
}

// open decrypts and checks a CBC record in constant time with respect to
// the padding and MAC: every failure is the same bad_record_mac, found
// after the same amount of work, so that no padding oracle exists.
func (c *cbcRecord) open(record []byte, seq uint64) ([]byte, error) {
	frag := record[recordHeaderLen:]
	// IV, then at least one MAC and one padding byte rounded to blocks.
	if len(frag)%sm4Block != 0 || len(frag) < sm4Block+sm3Size+sm4Block {
		return nil, errBadRecordMAC
	}
	copy(c.iv[:], frag[:sm4Block])
	body := frag[sm4Block:]
	c.dec.SetIV(c.iv[:])
	c.dec.CryptBlocks(body, body)

	padLen, padOK := checkPadding(body)
	// n is the plaintext length, clamped at zero without branching when
	// the padding length claims more than there is.
	n := len(body) - sm3Size - padLen
	n &^= n >> (strconvIntSize - 1)
	additionalData(&c.ad, seq, record[0], n)
	c.mac.Reset()
	c.mac.Write(c.ad[:])
	c.mac.Write(body[:n])
	mac := c.mac.Sum(c.sum[:0])
	// Feed the rest of the record through the hash so that the number of
	// SM3 compressions does not depend on the padding length (Lucky 13).
	c.mac.Write(body[n+sm3Size:])
	ok := subtle.ConstantTimeCompare(mac, body[n:n+sm3Size]) & padOK
	if ok != 1 {
		return nil, errBadRecordMAC
	}
	return body[:n], nil
}

// extend grows b by n bytes and returns the whole slice and the new tail.
func extend(b []byte, n int) (whole, tail []byte) {
	b = slices.Grow(b, n)
	whole = b[:len(b)+n]
	return whole, whole[len(b):]
}

const strconvIntSize = 32 << (^uint(0) >> 63)

// checkPadding reads the TLS padding at the end of b and returns the number
// of bytes to strip (padding plus length byte) and 1 if every padding byte
// equals the length, 0 otherwise. It reads the same 256 bytes (or all of b)
// whatever the padding says. b is at least sm3Size+1 bytes long.
func checkPadding(b []byte) (toRemove int, ok int) {
	p := int(b[len(b)-1])
	// The padding and the MAC must fit: p+1+sm3Size <= len(b).
	ok = subtle.ConstantTimeLessOrEq(p+1+sm3Size, len(b))
	scan := 256
	if scan > len(b) {
		scan = len(b)
	}
	bad := 0
	for i := 1; i <= scan; i++ {
		// in is 1 for the padding bytes (including the length byte).
		in := subtle.ConstantTimeLessOrEq(i, p+1)
		bad |= -in & (int(b[len(b)-i]) ^ p)
	}
	ok &= subtle.ConstantTimeEq(int32(bad), 0)
	// With bad padding, strip only the length byte: the MAC check then
	// fails in the ordinary way.
	toRemove = subtle.ConstantTimeSelect(ok, p+1, 1)
	return toRemove, ok
}
