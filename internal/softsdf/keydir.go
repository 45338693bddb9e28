package softsdf

import (
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/emmansun/gmsm/pkcs8"
	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"
)

// Card is the key directory of a software device: the library reads it
// from $SOFTSDF_KEYDIR when the device opens.
type Card struct {
	// Dir is the key directory, PINFile a file of one line holding PIN.
	Dir, PIN, PINFile string
	// Sign and Enc are the key pairs by index.
	Sign, Enc map[uint32]*sm2.PrivateKey
}

// NewCard writes new signing and encryption key pairs for the indexes
// into dir (sign-N.pem, enc-N.pem and their .pub.pem), encrypted with
// pin, and the PIN file dir/pin.
func NewCard(t testing.TB, dir, pin string, indexes ...uint32) *Card {
	t.Helper()
	c := &Card{Dir: dir, PIN: pin, PINFile: filepath.Join(dir, "pin"), Sign: map[uint32]*sm2.PrivateKey{}, Enc: map[uint32]*sm2.PrivateKey{}}
	if err := os.WriteFile(c.PINFile, []byte(pin+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, i := range indexes {
		c.Sign[i] = GenerateKey(t, dir, fmt.Sprintf("sign-%d", i), pin)
		c.Enc[i] = GenerateKey(t, dir, fmt.Sprintf("enc-%d", i), pin)
	}
	return c
}

// GenerateKey writes a new SM2 key as the key files name.pem and
// name.pub.pem in dir, encrypted with pin, and returns it.
func GenerateKey(t testing.TB, dir, name, pin string) *sm2.PrivateKey {
	t.Helper()
	k, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	WriteKey(t, dir, name, k, pin)
	return k
}

// WriteKey writes k and its public key as the key files name.pem and
// name.pub.pem in dir, encrypted with pin: rewriting a key with another
// PIN changes the card's PIN for that key.
func WriteKey(t testing.TB, dir, name string, k *sm2.PrivateKey, pin string) {
	t.Helper()
	der, err := pkcs8.MarshalPrivateKey(k, []byte(pin), nil)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := smx509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(file, typ string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, file), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(name+".pem", "ENCRYPTED PRIVATE KEY", der)
	write(name+".pub.pem", "PUBLIC KEY", pub)
}
