package certs

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
	"github.com/gmgate/gmgate/certs/internal/pemfile"
	"github.com/gmgate/gmgate/certs/pki"
	"github.com/gmgate/gmgate/internal/keyenc"
)

// loadErr loads f and returns the error text, failing when it loads.
func loadErr(t *testing.T, f TLCPFiles, opts LoadOptions) string {
	t.Helper()
	c, _, err := LoadTLCPFiles(f, opts)
	if err == nil {
		t.Fatalf("loaded %+v without error", c)
	}
	return err.Error()
}

func wantAll(t *testing.T, msg string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			t.Errorf("error %q\n  does not contain %q", msg, p)
		}
	}
}

func files(d pki.DualFiles) TLCPFiles {
	return TLCPFiles{SignCert: d.SignCert, SignKey: d.SignKey, EncCert: d.EncCert, EncKey: d.EncKey}
}

// writeChainedPair issues a pair for NAME.example.cn from a CA with an
// intermediate and writes it to a new directory.
func writeChainedPair(t *testing.T, name string) (*pki.CA, *pki.Dual, pki.DualFiles) {
	t.Helper()
	ica := newTestCA(t, true)
	d, err := ica.IssueDual(pki.IssueOptions{DNSNames: []string{name + ".example.cn"}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := d.Write(t.TempDir(), name, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ica, d, f
}

func TestLoadBadInput(t *testing.T) {
	ca := newTestCA(t, false)
	dir := t.TempDir()
	good := writeTestPair(t, ca, dir, "good", nil, "good.example.cn")
	other := writeTestPair(t, ca, dir, "other", nil, "other.example.cn")

	t.Run("mismatched key", func(t *testing.T) {
		f := files(good)
		f.SignKey = other.SignKey
		msg := loadErr(t, f, LoadOptions{})
		wantAll(t, msg, "sign_key "+other.SignKey, "does not belong to sign_cert "+good.SignCert, "give the key that was generated with this certificate")
	})
	t.Run("mismatched enc key", func(t *testing.T) {
		f := files(good)
		f.EncKey = other.EncKey
		wantAll(t, loadErr(t, f, LoadOptions{}), "enc_key "+other.EncKey, "does not belong to enc_cert "+good.EncCert)
	})
	t.Run("swapped certificates", func(t *testing.T) {
		f := files(good)
		f.SignCert, f.EncCert = good.EncCert, good.SignCert
		wantAll(t, loadErr(t, f, LoadOptions{}), "are swapped", good.EncCert+" is the encryption certificate", "exchange sign_cert and enc_cert")
	})
	t.Run("swapped keys", func(t *testing.T) {
		f := files(good)
		f.SignKey, f.EncKey = good.EncKey, good.SignKey
		wantAll(t, loadErr(t, f, LoadOptions{}), "sign_key "+good.EncKey+" and enc_key "+good.SignKey+" are swapped", "exchange sign_key and enc_key")
	})
	t.Run("swapped pairs", func(t *testing.T) {
		f := TLCPFiles{SignCert: good.EncCert, SignKey: good.EncKey, EncCert: good.SignCert, EncKey: good.SignKey}
		wantAll(t, loadErr(t, f, LoadOptions{}), "are swapped (with their keys)", "keyEncipherment", "exchange sign_cert/sign_key with enc_cert/enc_key")
	})
	t.Run("expired", func(t *testing.T) {
		past := func() time.Time { return time.Now().Add(-400 * 24 * time.Hour) }
		oldCA, err := pki.NewCA(pki.CAOptions{Now: past})
		if err != nil {
			t.Fatal(err)
		}
		d, err := oldCA.IssueDual(pki.IssueOptions{DNSNames: []string{"old.example.cn"}, Validity: 30 * 24 * time.Hour, Now: past})
		if err != nil {
			t.Fatal(err)
		}
		f, err := d.Write(t.TempDir(), "old", nil)
		if err != nil {
			t.Fatal(err)
		}
		wantAll(t, loadErr(t, files(f), LoadOptions{}), "sign_cert "+f.SignCert+" expired on", "days ago", "renew it")
	})
	t.Run("not yet valid", func(t *testing.T) {
		wantAll(t, loadErr(t, files(good), LoadOptions{Now: func() time.Time { return time.Now().Add(-time.Hour) }}), "sign_cert "+good.SignCert+" is not valid until", "check the system clock")
	})
	t.Run("missing chain", func(t *testing.T) {
		ica, d, f := writeChainedPair(t, "chain")
		roots := LoadOptions{Roots: []*smx509.Certificate{ica.Root}}
		if _, _, err := LoadTLCPFiles(files(f), roots); err != nil {
			t.Fatalf("complete chain: %v", err)
		}
		// Leaf only, intermediate left out.
		if err := pemfile.WriteCertFile(f.SignCert, d.SignCert); err != nil {
			t.Fatal(err)
		}
		wantAll(t, loadErr(t, files(f), roots), "sign_cert "+f.SignCert, "unknown issuer", `issuer "CN=gmgate local SM2 intermediate CA"`, "if it is an intermediate CA, append its certificate to the file")
		// Wrong order: intermediate first.
		if err := pemfile.WriteCertFile(f.SignCert, d.Chain[0], d.SignCert); err != nil {
			t.Fatal(err)
		}
		wantAll(t, loadErr(t, files(f), roots), "starts with a CA certificate", "put the server's certificate first")
	})
	t.Run("damaged block in the chain", func(t *testing.T) {
		ica, d, f := writeChainedPair(t, "cut")
		leaf, inter := pemfile.EncodeCertsPEM(d.SignCert), pemfile.EncodeCertsPEM(d.Chain[0])
		for name, data := range map[string][]byte{
			// The intermediate pasted without its last lines.
			"cut short": append(append([]byte{}, leaf...), inter[:len(inter)/2]...),
			// The intermediate damaged, a good root after it: pem.Decode
			// alone skips the damaged block and reads on.
			"bad base64": append(append(append([]byte{}, leaf...), "-----BEGIN CERTIFICATE-----\nMIIB!!!!\n-----END CERTIFICATE-----\n"...), pemfile.EncodeCertsPEM(ica.Root)...),
		} {
			if err := os.WriteFile(f.SignCert, data, 0o644); err != nil {
				t.Fatal(err)
			}
			wantAll(t, loadErr(t, files(f), LoadOptions{}), "sign_cert "+f.SignCert, fmt.Sprintf("block 2 (line %d)", bytes.Count(leaf, []byte("\n"))+1), "damaged", "copy the whole block again")
			if r := pki.Inspect([]string{f.SignCert}, pki.InspectOptions{}); !r.HasErrors() {
				t.Errorf("%s: inspect found no error", name)
			}
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		enc := writeTestPair(t, ca, t.TempDir(), "enc", []byte("right password"), "enc.example.cn")
		t.Setenv("GMGATE_TEST_KEYPW", "wrong password")
		f := files(enc)
		f.SignKey = "file:" + enc.SignKey + "?password-env=GMGATE_TEST_KEYPW"
		f.EncKey = "file:" + enc.EncKey + "?password-env=GMGATE_TEST_KEYPW"
		msg := loadErr(t, f, LoadOptions{})
		wantAll(t, msg, "sign_key", enc.SignKey, "wrong password", "check the password that password-env or password-file gives")
		if strings.Contains(msg, "wrong password for") && strings.Contains(msg, "right password") {
			t.Error("the error reveals the password")
		}
		t.Setenv("GMGATE_TEST_KEYPW", "right password")
		if _, _, err := LoadTLCPFiles(f, LoadOptions{}); err != nil {
			t.Fatalf("right password: %v", err)
		}
		f.SignKey = enc.SignKey
		wantAll(t, loadErr(t, f, LoadOptions{}), "sign_key", "encrypted", "password-env=VAR or password-file=PATH")
	})
	t.Run("non-PEM file", func(t *testing.T) {
		junk := filepath.Join(t.TempDir(), "junk.crt")
		os.WriteFile(junk, []byte("this is not a certificate\n"), 0o644)
		f := files(good)
		f.SignCert = junk
		wantAll(t, loadErr(t, f, LoadOptions{}), "sign_cert "+junk, "not a PEM certificate file", "-----BEGIN CERTIFICATE-----", "openssl x509 -inform DER")
	})
	t.Run("key given as certificate", func(t *testing.T) {
		f := files(good)
		f.EncCert = good.EncKey
		wantAll(t, loadErr(t, f, LoadOptions{}), "enc_cert "+good.EncKey, "holds a PRIVATE KEY, not a certificate", "look swapped")
	})
	t.Run("non-PEM key", func(t *testing.T) {
		f := files(good)
		f.EncKey = good.EncCert
		wantAll(t, loadErr(t, f, LoadOptions{}), "enc_key", "no private key found")
	})
	t.Run("RSA certificate on the TLCP side", func(t *testing.T) {
		rsaCert, rsaKey := writeRSAServer(t, t.TempDir(), "rsa.example.com")
		f := files(good)
		f.SignCert, f.SignKey = rsaCert, rsaKey
		wantAll(t, loadErr(t, f, LoadOptions{}), "sign_cert "+rsaCert, "RSA-2048", "TLCP needs SM2", "gmgate cert migrate --from "+rsaCert)
	})
	t.Run("RSA key as sign_key", func(t *testing.T) {
		_, rsaKey := writeRSAServer(t, t.TempDir(), "rsa.example.com")
		f := files(good)
		f.SignKey = rsaKey
		msg := loadErr(t, f, LoadOptions{})
		wantAll(t, msg, "sign_key "+rsaKey+" is an RSA-2048 key; TLCP needs SM2 keys", "the SM2 key generated with sign_cert "+good.SignCert)
		if strings.Contains(msg, "public keys differ") {
			t.Errorf("reported as a mismatch: %s", msg)
		}
		f = files(good)
		f.EncKey = rsaKey
		wantAll(t, loadErr(t, f, LoadOptions{}), "enc_key "+rsaKey+" is an RSA-2048 key")
	})
	t.Run("names of a command's flags", func(t *testing.T) {
		flags := LoadOptions{Names: FieldNames{SignCert: "--cert", SignKey: "--key", EncCert: "--enc-cert", EncKey: "--enc-key"}}
		f := files(good)
		f.EncCert = ""
		msg := loadErr(t, f, flags)
		wantAll(t, msg, "--enc-cert is not set")
		if strings.Contains(msg, "enc_cert") {
			t.Errorf("configuration field name in %q", msg)
		}
		f = files(good)
		f.SignKey = other.SignKey
		wantAll(t, loadErr(t, f, flags), "--key "+other.SignKey+" does not belong to --cert "+good.SignCert)
	})
	t.Run("signing certificate alone", func(t *testing.T) {
		f := TLCPFiles{SignCert: good.SignCert, SignKey: good.SignKey}
		wantAll(t, loadErr(t, f, LoadOptions{}), "enc_cert is not set")
		c, _, err := LoadTLCPFiles(f, LoadOptions{SignOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.SignCertificate) == 0 || c.SignKey == nil || c.EncCertificate != nil || c.EncKey != nil {
			t.Errorf("sign-only identity %+v", c)
		}
		f.SignKey = other.SignKey
		wantAll(t, loadErr(t, f, LoadOptions{SignOnly: true}), "does not belong to sign_cert")
		// Half an encryption pair is still an error.
		f = TLCPFiles{SignCert: good.SignCert, SignKey: good.SignKey, EncCert: good.EncCert}
		wantAll(t, loadErr(t, f, LoadOptions{SignOnly: true}), "enc_key is not set")
	})
	t.Run("missing file", func(t *testing.T) {
		f := files(good)
		f.EncCert = filepath.Join(dir, "nope.crt")
		wantAll(t, loadErr(t, f, LoadOptions{}), "enc_cert "+f.EncCert+" does not exist", "give the path of the PEM certificate file")
	})
	t.Run("SM2 certificate on the TLS side", func(t *testing.T) {
		_, _, err := LoadTLSFiles(TLSFiles{Cert: good.SignCert, Key: good.SignKey}, LoadOptions{})
		if err == nil {
			t.Fatal("loaded")
		}
		wantAll(t, err.Error(), "cert "+good.SignCert, "SM2 certificate, which TLS clients cannot use")
	})
}

func TestLoadHostileInputDoesNotPanic(t *testing.T) {
	dir := t.TempDir()
	inputs := map[string]string{
		"empty":         "",
		"bad base64":    "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
		"truncated der": "-----BEGIN CERTIFICATE-----\nMIIBkTCB+wIJAK==\n-----END CERTIFICATE-----\n",
		"binary":        "\x30\x82\xff\xff\x00\x01",
	}
	for name, data := range inputs {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		os.WriteFile(p, []byte(data), 0o644)
		if _, err := pemfile.ReadCertificates(p); err == nil {
			t.Errorf("%s: parsed", name)
		}
		r := pki.Inspect([]string{p}, pki.InspectOptions{})
		if !r.HasErrors() {
			t.Errorf("%s: inspect found no error", name)
		}
		if _, err := keyenc.Describe([]byte(data)); err == nil && data != "" {
			t.Errorf("%s: described as an encrypted key", name)
		}
	}
}

// Problems of independent parts are reported together, each with its
// field, so that a configuration check can list all of them at once.
func TestLoadReportsEveryProblem(t *testing.T) {
	ca := newTestCA(t, false)
	dir := t.TempDir()
	good := writeTestPair(t, ca, dir, "good", nil, "good.example.cn")
	f := files(good)
	f.SignCert = filepath.Join(dir, "missing.crt")
	f.EncKey = "file:" + good.EncKey + "?password-env=GMGATE_TEST_UNSET_PASSWORD"
	_, _, err := LoadTLCPFiles(f, LoadOptions{})
	if err == nil {
		t.Fatal("loaded")
	}
	var fields []string
	for _, e := range joined(err) {
		fe, ok := e.(*FieldError)
		if !ok {
			t.Fatalf("%T is not a *FieldError: %v", e, e)
		}
		fields = append(fields, fe.Side+"."+fe.Field)
	}
	if strings.Join(fields, " ") != "tlcp.sign_cert tlcp.enc_key" {
		t.Errorf("fields = %v (%v)", fields, err)
	}

	// An RSA sign_key and an enc_key of another pair are both reported,
	// each as what it is; messages use a command's flag names while the
	// fields stay the configuration's.
	other := writeTestPair(t, ca, dir, "other", nil, "other.example.cn")
	_, rsaKey := writeRSAServer(t, dir, "rsa.example.com")
	mixed := files(good)
	mixed.SignKey, mixed.EncKey = rsaKey, other.EncKey
	_, _, err = LoadTLCPFiles(mixed, LoadOptions{Names: FieldNames{SignCert: "--cert", SignKey: "--key", EncCert: "--enc-cert", EncKey: "--enc-key"}})
	if err == nil {
		t.Fatal("loaded")
	}
	var msgs []string
	fields = nil
	for _, e := range joined(err) {
		fe := e.(*FieldError)
		fields = append(fields, fe.Field)
		msgs = append(msgs, fe.Error())
	}
	if strings.Join(fields, " ") != "sign_key enc_key" {
		t.Errorf("fields = %v (%v)", fields, err)
	}
	wantAll(t, strings.Join(msgs, "\n"), "--key "+rsaKey+" is an RSA-2048 key; TLCP needs SM2 keys",
		"--enc-key "+other.EncKey+" does not belong to --enc-cert "+good.EncCert)

	// A store names the source of each problem, across sources.
	bad := files(good)
	bad.SignKey = good.EncKey
	_, err = NewStore(StoreOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		Source{Name: "a", TLCP: &f},
		Source{Name: "b", TLCP: &bad, TLS: &TLSFiles{Cert: good.SignCert, Key: good.SignKey}})
	if err == nil {
		t.Fatal("store loaded")
	}
	var got []string
	for _, e := range joined(err) {
		fe := e.(*FieldError)
		got = append(got, fe.Source+":"+fe.Side+"."+fe.Field)
	}
	if want := "a:tlcp.sign_cert a:tlcp.enc_key b:tlcp.sign_key b:tls.cert"; strings.Join(got, " ") != want {
		t.Errorf("store problems = %v, want %s\n%v", got, want, err)
	}
}

// Offline, certificates are checked and keys are not opened.
func TestLoadOffline(t *testing.T) {
	ca := newTestCA(t, false)
	dir := t.TempDir()
	good := writeTestPair(t, ca, dir, "good", nil, "good.example.cn")
	f := files(good)
	f.SignKey = "file:" + filepath.Join(dir, "absent.key") + "?password-env=GMGATE_TEST_UNSET_PASSWORD"
	f.EncKey = "sdf:/nonexistent/libsdf.so?index=1&key=enc&pin-env=GMGATE_TEST_UNSET_PIN"
	c, _, err := LoadTLCPFiles(f, LoadOptions{Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	if c.SignKey != nil || c.EncKey != nil || c.SignLeaf == nil {
		t.Errorf("offline load: %+v", c)
	}
	swapped := f
	swapped.SignCert, swapped.EncCert = good.EncCert, good.SignCert
	wantAll(t, loadErr(t, swapped, LoadOptions{Offline: true}), "are swapped")
	if _, _, err := LoadTLSFiles(TLSFiles{Cert: good.SignCert, Key: "nope"}, LoadOptions{Offline: true}); err == nil {
		t.Error("an SM2 certificate on the TLS side passed offline")
	}
}

// FuzzParseCertificates: any file is certificates or an error, never a
// panic, and a "-----BEGIN" line is never skipped: each starts a block,
// read or reported damaged.
func FuzzParseCertificates(f *testing.F) {
	ca := newTestCA(f, true)
	leaf, inter := pemfile.EncodeCertsPEM(ca.Intermediate), pemfile.EncodeCertsPEM(ca.Root)
	f.Add(append(append([]byte{}, leaf...), inter...))
	f.Add(append(append([]byte{}, leaf...), inter[:len(inter)/2]...))
	f.Add([]byte("text\n-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\r\n-----BEGIN X"))
	f.Add(ca.Root.Raw)
	f.Fuzz(func(t *testing.T, data []byte) {
		certs, err := pemfile.ParseCertificates(data)
		if err == nil && len(certs) == 0 {
			t.Fatal("no certificates and no error")
		}
		begins := bytes.Count(data, []byte("\n-----BEGIN "))
		if bytes.HasPrefix(data, []byte("-----BEGIN ")) {
			begins++
		}
		if n := len(pemfile.SplitPEM(data)); n != begins {
			t.Fatalf("%d blocks for %d -----BEGIN lines", n, begins)
		}
	})
}
