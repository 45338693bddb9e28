package certs

import (
	"encoding/pem"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gmgate/gmgate/certs/pki"
)

// A TLS pool takes the RSA and ECDSA CAs of a bundle and leaves the SM2
// ones out; a bundle of SM2 CAs alone is refused. Both pools refuse a
// damaged block.
func TestCAPools(t *testing.T) {
	sm2CA, err := pki.NewCA(pki.CAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ecCA, err := pki.NewCA(pki.CAOptions{KeyAlgorithm: pki.KeyECDSAP256})
	if err != nil {
		t.Fatal(err)
	}
	sm2PEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: sm2CA.Root.Raw})
	ecPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ecCA.Root.Raw})
	mixed := append(append([]byte{}, sm2PEM...), ecPEM...)
	if _, err := TLSCAPool("mixed.pem", mixed); err != nil {
		t.Errorf("TLS pool of SM2 and ECDSA CAs: %v", err)
	}
	if _, err := CAPool("mixed.pem", mixed); err != nil {
		t.Errorf("TLCP pool of SM2 and ECDSA CAs: %v", err)
	}
	if _, err := TLSCAPool("sm2.pem", sm2PEM); err == nil || !strings.Contains(err.Error(), "sm2.pem holds SM2 CA certificates only") {
		t.Errorf("TLS pool of an SM2 CA alone: %v", err)
	}
	damaged := append(append([]byte{}, ecPEM...), ecPEM[:len(ecPEM)/2]...)
	for name, pool := range map[string]func(string, []byte) error{
		"TLS":  func(f string, b []byte) error { _, err := TLSCAPool(f, b); return err },
		"TLCP": func(f string, b []byte) error { _, err := CAPool(f, b); return err },
	} {
		if err := pool("bundle.pem", damaged); err == nil || !strings.HasPrefix(err.Error(), "bundle.pem: PEM block 2 (line ") {
			t.Errorf("%s pool of a damaged bundle: %v", name, err)
		}
	}
}

// A CA file that is not there is named with its field and the fix, as
// the tlcp.ca of an upstream and the --ca of a command need it.
func TestReadCAFileNamesTheField(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "partner-ca.crt")
	_, err := ReadCAFile("ca", missing)
	if err == nil || err.Error() != "ca "+missing+" does not exist; give the path of the PEM file of the CA certificates (a relative path is relative to the configuration file's directory)" {
		t.Errorf("config field: %v", err)
	}
	if _, err := ReadCAFile("--ca", missing); err == nil || !strings.Contains(err.Error(), "relative to the current directory") {
		t.Errorf("flag: %v", err)
	}
}
