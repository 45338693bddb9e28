package sdf

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"sync"
)

// refused remembers, for the life of the process, the PINs a device
// refused, by library and key index, so that no key opened later with the
// same PIN offers it again: not the other key of the index (opened after
// the first failed and closed), nor a reload. Cards lock a key after a
// few failures. Only a digest of each PIN under a key of this process is
// kept.
var refused struct {
	sync.Mutex
	key [32]byte
	m   map[refusedPIN]error
}

type refusedPIN struct {
	library string
	index   uint32
	digest  [sha256.Size]byte
}

func refusedKey(library string, index uint32, pin []byte) refusedPIN {
	if refused.m == nil {
		rand.Read(refused.key[:])
		refused.m = map[refusedPIN]error{}
	}
	mac := hmac.New(sha256.New, refused.key[:])
	mac.Write(pin)
	k := refusedPIN{library: library, index: index}
	mac.Sum(k.digest[:0])
	return k
}

// refusedBefore returns the device's answer to pin at index of library
// when it refused it before, nil otherwise.
func refusedBefore(library string, index uint32, pin []byte) error {
	refused.Lock()
	defer refused.Unlock()
	return refused.m[refusedKey(library, index, pin)]
}

// remember records that the device refused pin at index of library.
func remember(library string, index uint32, pin []byte, err error) {
	refused.Lock()
	defer refused.Unlock()
	refused.m[refusedKey(library, index, pin)] = err
}
