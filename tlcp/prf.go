package tlcp

import (
	"crypto/hmac"
	"hash"

	"github.com/emmansun/gmsm/sm3"
)

const (
	masterSecretLength = 48
	finishedVerifyLen  = 12
)

var (
	labelMasterSecret   = []byte("master secret")
	labelKeyExpansion   = []byte("key expansion")
	labelClientFinished = []byte("client finished")
	labelServerFinished = []byte("server finished")
)

// prf fills out with PRF(secret, label, seed1 || seed2): the TLS 1.2
// P_hash construction over HMAC-SM3.
func prf(out, secret, label, seed1, seed2 []byte) {
	mac := hmac.New(sm3.New, secret)
	pHash(out, mac, label, seed1, seed2)
}

func pHash(out []byte, mac hash.Hash, label, seed1, seed2 []byte) {
	var a, block [sm3Size]byte
	// A(1) = HMAC(secret, seed)
	mac.Write(label)
	mac.Write(seed1)
	mac.Write(seed2)
	mac.Sum(a[:0])
	for len(out) > 0 {
		mac.Reset()
		mac.Write(a[:])
		mac.Write(label)
		mac.Write(seed1)
		mac.Write(seed2)
		mac.Sum(block[:0])
		n := copy(out, block[:])
		out = out[n:]
		if len(out) == 0 {
			break
		}
		// A(i+1) = HMAC(secret, A(i))
		mac.Reset()
		mac.Write(a[:])
		mac.Sum(a[:0])
	}
}

// masterFromPreMaster derives the 48-byte master secret.
func masterFromPreMaster(preMasterSecret, clientRandom, serverRandom []byte) []byte {
	master := make([]byte, masterSecretLength)
	prf(master, preMasterSecret, labelMasterSecret, clientRandom, serverRandom)
	return master
}

// keyBlock expands the master secret into the suite's keys (note the
// server random comes first here).
func keyBlock(suite *cipherSuite, master, clientRandom, serverRandom []byte) []byte {
	kb := make([]byte, suite.keyBlockLen())
	prf(kb, master, labelKeyExpansion, serverRandom, clientRandom)
	return kb
}

// finishedData computes verify_data over the transcript hash so far.
func finishedData(master []byte, isClient bool, transcriptHash []byte) []byte {
	label := labelServerFinished
	if isClient {
		label = labelClientFinished
	}
	out := make([]byte, finishedVerifyLen)
	prf(out, master, label, transcriptHash, nil)
	return out
}
