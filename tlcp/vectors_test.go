package tlcp

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/sm3"
)

// The vectors below are those of the protocol facts, section 10.

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func seq(from, to byte) []byte {
	var b []byte
	for i := int(from); i <= int(to); i++ {
		b = append(b, byte(i))
	}
	return b
}

func TestPublishedMasterSecretVector(t *testing.T) {
	pms := unhex(t, "0101 E582AAC5064CF164DCAC7A14BFEC7BF30AF646558DC7DC63CBC77265EDE6E7721D2161FA098EF3EC41FECBFEF107")
	cr := unhex(t, "B20653C9B35996333D8079CF401FE28791704502700584C4C6A0F04894597DE1")
	sr := unhex(t, "D76E6BC156B1BA2A5CEA6C251B6C2038E00CBD8194132BC33452E22E0F324F2D")
	want := unhex(t, "E64A628ECEE2F1F1E2A3E1ADFBA7E4AEE7358177212594F272F97592B709F0DB65995D25B116FAE296890BA1A84F6BFB")
	if got := masterFromPreMaster(newHMACSM3(nil), pms, cr, sr); !bytes.Equal(got, want) {
		t.Fatalf("master secret\n got %x\nwant %x", got, want)
	}
}

// selfVectors are the inputs of the self-generated vectors.
func selfVectors(t *testing.T) (cr, sr, pms []byte) {
	cr = seq(0x00, 0x1f)
	sr = seq(0x20, 0x3f)
	pms = append([]byte{0x01, 0x01}, seq(0x40, 0x6d)...)
	return
}

func TestKeyScheduleVectors(t *testing.T) {
	t.Run("new", func(t *testing.T) { testKeyScheduleVectors(t, newHMACSM3(nil)) })
	// What getHandshakeMAC(nil) makes when the pool is empty: never
	// keyed until masterFromPreMaster keys it.
	unkeyed := new(hmacSM3)
	unkeyed.prepare()
	t.Run("unkeyed", func(t *testing.T) { testKeyScheduleVectors(t, unkeyed) })
	// A MAC that served a handshake before: keyed with other secrets,
	// used, wiped.
	used := newHMACSM3([]byte("an earlier pre-master secret"))
	used.setKey([]byte("an earlier master secret"))
	prf(make([]byte, 40), used, labelKeyExpansion, []byte("random"), nil)
	used.wipe()
	t.Run("reused", func(t *testing.T) { testKeyScheduleVectors(t, used) })
}

func testKeyScheduleVectors(t *testing.T, mac *hmacSM3) {
	cr, sr, pms := selfVectors(t)
	master := masterFromPreMaster(mac, pms, cr, sr)
	wantMaster := unhex(t, "306b196f1aca486eb07e607e4f6c8ad613fd42db24aa2e1ec846172fc06612fedd19ecdfa4d1917442f4393de9870271")
	if !bytes.Equal(master, wantMaster) {
		t.Fatalf("master secret\n got %x\nwant %x", master, wantMaster)
	}

	// The whole 128-byte partition of the CBC suites; keyBlock derives
	// only the 96 bytes in use (MAC and encryption keys).
	cbc := make([]byte, 128)
	prf(cbc, mac, labelKeyExpansion, sr, cr)
	if kb := keyBlock(cipherSuiteByID(ECC_SM4_CBC_SM3), mac, cr, sr); !bytes.Equal(kb, cbc[:96]) {
		t.Fatalf("CBC key block %x is not the first 96 bytes of the PRF stream", kb)
	}
	wantCBC := unhex(t, `7eb0d36d229fae096fbe3d1b8d5313061c49f684d1d59a565de186fb1660bb88
		6816e08347202b588965d2f3bcae44b19b32cbeb161f37a8dddcac70d5644c1f
		805960b8357dfc198b68ff88f26f9ae0 6a0c9153eded3bd78d0b91f14ececa82
		5c40f0b866cdfc830f3ff9b0ad8ad5a7 bad49533bf722336de80ce16e18c128a`)
	if !bytes.Equal(cbc, wantCBC) {
		t.Fatalf("CBC key block\n got %x\nwant %x", cbc, wantCBC)
	}
	gcm := keyBlock(cipherSuiteByID(ECC_SM4_GCM_SM3), mac, cr, sr)
	if !bytes.Equal(gcm, wantCBC[:40]) {
		t.Fatalf("GCM key block\n got %x\nwant %x", gcm, wantCBC[:40])
	}

	// The transcript hash is SM3("abc").
	th := sm3.New()
	th.Write([]byte("abc"))
	if got, want := finishedData(mac, true, th), unhex(t, "7baaca42e32b9d012fe99378"); !bytes.Equal(got[:], want) {
		t.Fatalf("client verify_data %x, want %x", got, want)
	}
	if got, want := finishedData(mac, false, th), unhex(t, "4d133c39b2deeb74dbb08155"); !bytes.Equal(got[:], want) {
		t.Fatalf("server verify_data %x, want %x", got, want)
	}
}

func TestRecordVectors(t *testing.T) {
	cr, sr, pms := selfVectors(t)
	mac := newHMACSM3(nil)
	masterFromPreMaster(mac, pms, cr, sr)
	for _, tc := range []struct {
		suite uint16
		rand  []byte
		want  string
	}{
		{ECC_SM4_CBC_SM3, seq(0xa0, 0xaf), `1701010040 a0a1a2a3a4a5a6a7a8a9aaabacadaeaf
			e64717a4ff53687b5b825529e09c2611114f6193e86b098683cc2d476c654597
			f3c4957b3398fd6c5b0f9e0aba4975a3`},
		{ECC_SM4_GCM_SM3, nil, `170101001d 0000000000000000 fb68ae61cb c58dd9155de3f0ea5fdfcfd7d9694cb3`},
	} {
		suite := cipherSuiteByID(tc.suite)
		kb := keyBlock(suite, mac, cr, sr)
		// The client writes, the server reads.
		serverRead, _, err := suite.newCiphers(kb, false)
		if err != nil {
			t.Fatal(err)
		}
		_, clientWrite, err := suite.newCiphers(kb, true)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := clientWrite.seal(nil, recordTypeApplicationData, []byte("hello"), 0, bytes.NewReader(tc.rand))
		if err != nil {
			t.Fatal(err)
		}
		if want := unhex(t, tc.want); !bytes.Equal(rec, want) {
			t.Fatalf("%s record\n got %x\nwant %x", suite.name, rec, want)
		}
		pt, err := serverRead.open(rec, 0)
		if err != nil || string(pt) != "hello" {
			t.Fatalf("%s open: %q, %v", suite.name, pt, err)
		}
	}
}

func TestSM2KeyExchangeVector(t *testing.T) {
	fill := func(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }
	serverEnc, err := sm2.NewPrivateKey(fill(0x11))
	if err != nil {
		t.Fatal(err)
	}
	clientEnc, err := sm2.NewPrivateKey(fill(0x33))
	if err != nil {
		t.Fatal(err)
	}
	serverEph, err := ecdh.P256().NewPrivateKey(fill(0x22))
	if err != nil {
		t.Fatal(err)
	}
	clientEph, err := ecdh.P256().NewPrivateKey(fill(0x44))
	if err != nil {
		t.Fatal(err)
	}
	wantRA := unhex(t, `044467e6043f38645e740050f3d6c9d6a0bf6b13d3b57892842be9b75cca3ce884
		f0b5c27a16795142fa467fe6818cdb393c95f8e17d28f7e0a6557bbea8d65034`)
	if !bytes.Equal(serverEph.PublicKey().Bytes(), wantRA) {
		t.Fatalf("R_A %x", serverEph.PublicKey().Bytes())
	}
	wantParams := append(unhex(t, "03002941"), wantRA...)
	if got := marshalECDHEParams(serverEph.PublicKey().Bytes()); !bytes.Equal(got, wantParams) {
		t.Fatalf("ServerECDHEParams %x", got)
	}
	wantPMS := unhex(t, "4c564b350c6ca481954a63b05d92a9d68d2ed1e4b7483529c7028bfad691aa2c8a78b4aca396471b44b223e67ac97f58")
	serverPMS, err := sm2KeyExchange(true, serverEnc, &serverEnc.PublicKey, serverEph, &clientEnc.PublicKey, clientEph.PublicKey().Bytes())
	if err != nil {
		t.Fatal(err)
	}
	clientPMS, err := sm2KeyExchange(false, clientEnc, &clientEnc.PublicKey, clientEph, &serverEnc.PublicKey, serverEph.PublicKey().Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(serverPMS, wantPMS) || !bytes.Equal(clientPMS, wantPMS) {
		t.Fatalf("PMS\nserver %x\nclient %x\n  want %x", serverPMS, clientPMS, wantPMS)
	}

	// The signing digest uses Z with the default user ID.
	e, err := sm2.CalculateSM2Hash(&serverEnc.PublicKey, []byte("abc"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := unhex(t, "a2c97ee331df4dda3e79d16d0f3044f40242120f15236fe2835275376ad85163"); !bytes.Equal(e, want) {
		t.Fatalf("e = %x, want %x", e, want)
	}
}
