package accel

import (
	"context"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/emmansun/gmsm/pkcs8"
	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmgate/gmgate/accel/sdf"
)

func TestParseRef(t *testing.T) {
	tests := []struct{ in, scheme, path, query string }{
		{"/etc/gmgate/sign.key", "file", "/etc/gmgate/sign.key", ""},
		{"./sign.key", "file", "./sign.key", ""},
		{"file:/etc/k.pem?password-env=PW", "file", "/etc/k.pem", "password-env=PW"},
		{"SDF:/opt/libsdf.so?index=1&key=sign", "sdf", "/opt/libsdf.so", "index=1&key=sign"},
		{"sdf:///opt/libsdf.so?index=2", "sdf", "/opt/libsdf.so", "index=2"},
	}
	for _, tc := range tests {
		r, err := ParseRef(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if r.Scheme != tc.scheme || r.Path != tc.path || r.Params.Encode() != tc.query {
			t.Errorf("%s: got %s %s %s", tc.in, r.Scheme, r.Path, r.Params.Encode())
		}
	}
	for _, bad := range []string{"", "  ", "sdf:?index=1", "sdf:/x?%zz"} {
		if _, err := ParseRef(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestRefHidesInlineSecrets(t *testing.T) {
	for _, s := range []string{
		"sdf:/lib.so?index=1&pin=s3cretpin&key=sign", "file:/k.pem?password=s3cretpin", "sdf:/x?PIN=s3cretpin&%zz",
		"file:/k.pem?Password=s3cretpin", "sdf:/lib.so?index=1&key=sign&pin%3Ds3cretpin", "sdf:/lib.so?index=1&key=sign&pin%3ds3cretpin",
		"tpm:/dev/tpm0?pin=s3cretpin", "/k.pem?password=s3cretpin",
	} {
		r, err := ParseRef(s)
		if err == nil && strings.Contains(r.String(), "s3cretpin") {
			t.Errorf("String shows the secret: %s", r)
		}
		if err != nil && strings.Contains(err.Error(), "s3cretpin") {
			t.Errorf("the error shows the secret: %v", err)
		}
		_, err = Open(context.Background(), s)
		if err == nil || strings.Contains(err.Error(), "s3cretpin") {
			t.Errorf("Open(%q): %v", s, err)
		}
	}
	_, err := Open(context.Background(), "tpm:/dev/tpm0?pin-env=s3cretpin")
	if err == nil || !strings.Contains(err.Error(), `unknown scheme "tpm" (known: file, sdf)`) || strings.Contains(err.Error(), "s3cretpin") {
		t.Errorf("unknown scheme: %v", err)
	}
	// A written-out secret is refused before any backend sees it, in any
	// case or encoding.
	for _, s := range []string{"sdf:/lib.so?index=1&key=sign&pin%3Ds3cretpin", "file:/k.pem?Password=s3cretpin"} {
		if _, err := ParseRef(s); err == nil || !strings.Contains(err.Error(), "may not be written in the key reference") {
			t.Errorf("ParseRef(%q): %v", s, err)
		}
	}
}

// writeSM2Key writes an encrypted PKCS#8 SM2 key and returns it.
func writeSM2Key(t *testing.T, path string, password []byte) *sm2.PrivateKey {
	t.Helper()
	k, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := pkcs8.MarshalPrivateKey(k, password, nil)
	if err != nil {
		t.Fatal(err)
	}
	typ := "PRIVATE KEY"
	if password != nil {
		typ = "ENCRYPTED PRIVATE KEY"
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSoftwareKeyAndSelfTest(t *testing.T) {
	dir := t.TempDir()
	signFile, encFile := filepath.Join(dir, "sign.key"), filepath.Join(dir, "enc.key")
	signKey := writeSM2Key(t, signFile, nil)
	encKey := writeSM2Key(t, encFile, []byte("enc-password"))
	t.Setenv("GMGATE_TEST_KEYPW", "enc-password")
	ctx := context.Background()

	sign, err := Open(ctx, signFile)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := Open(ctx, "file:"+encFile+"?password-env=GMGATE_TEST_KEYPW")
	if err != nil {
		t.Fatal(err)
	}
	if sign.Backend() != "software" || !SupportsKeyAgreement(enc) {
		t.Errorf("backend %s, key agreement %v", sign.Backend(), SupportsKeyAgreement(enc))
	}
	signCert, encCert := selfSigned(t, signKey, false), selfSigned(t, encKey, true)
	if err := SelfTest(ctx, sign, signCert, UseSign); err != nil {
		t.Error(err)
	}
	if err := SelfTest(ctx, enc, encCert, UseEnc); err != nil {
		t.Error(err)
	}
	err = SelfTest(ctx, enc, signCert, UseSign)
	if err == nil || !strings.Contains(err.Error(), "the signing key (software backend) does not match the signing certificate") || !strings.Contains(err.Error(), "serial") {
		t.Errorf("swapped: %v", err)
	}
	if _, err := Open(ctx, "file:"+encFile+"?password-env=GMGATE_NOT_SET_PW"); err == nil || !strings.Contains(err.Error(), "GMGATE_NOT_SET_PW (named by password-env) is not set") {
		t.Errorf("missing password: %v", err)
	}
	t.Setenv("GMGATE_TEST_KEYPW", "wrong-password")
	if _, err := Open(ctx, "file:"+encFile+"?password-env=GMGATE_TEST_KEYPW"); !errors.Is(err, ErrKeyPassword) {
		t.Errorf("wrong password: %v", err)
	}
}

func selfSigned(t *testing.T, k *sm2.PrivateKey, enc bool) *smx509.Certificate {
	t.Helper()
	ku := smx509.KeyUsageDigitalSignature
	if enc {
		ku = smx509.KeyUsageKeyEncipherment
	}
	tmpl := &smx509.Certificate{SerialNumber: bigOne(), KeyUsage: ku}
	der, err := smx509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	c, err := smx509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestResult(t *testing.T) {
	tests := map[string]error{
		"ok":             nil,
		"timeout":        fmt.Errorf("x: %w", sdf.ErrTimeout),
		"pool_exhausted": fmt.Errorf("x: %w", sdf.ErrPoolExhausted),
		"closed":         sdf.ErrClosed,
		"device_error":   fmt.Errorf("x: %w", &sdf.Error{Func: "SDF_InternalSign_ECC", Code: 0x01000003}),
		"error":          sdf.ErrDecryption,
	}
	for want, err := range tests {
		if got := Result(err); got != want {
			t.Errorf("Result(%v) = %q, want %q", err, got, want)
		}
	}
}

func bigOne() *big.Int { return big.NewInt(1) }
