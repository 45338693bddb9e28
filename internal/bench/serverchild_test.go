package bench

import (
	"context"
	"strings"
	"testing"
)

// The server identity comes from flags: files that do not exist are named
// by their flags, without a configuration file's directory that the
// command does not have.
func TestChildServerNamesMissingFilesByFlag(t *testing.T) {
	_, _, err := startChildServer(context.Background(), childConfig{Protocol: "tlcp",
		SignCert: "missing.sign.crt", SignKey: "missing.sign.key", EncCert: "missing.enc.crt", EncKey: "missing.enc.key"})
	if err == nil {
		t.Fatal("started without its files")
	}
	for _, want := range []string{"--sign-cert missing.sign.crt does not exist", "--enc-key missing.enc.key does not exist", "relative to the current directory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "configuration file") || strings.Contains(err.Error(), "sign_cert") {
		t.Errorf("names a configuration file or its fields: %v", err)
	}
}
