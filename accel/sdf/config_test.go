package sdf

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	pinFile := filepath.Join(t.TempDir(), "pin")
	if err := os.WriteFile(pinFile, []byte("card-pin-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SDF_TEST_PIN", "env-pin-12")
	t.Setenv("SDF_EMPTY_PIN", "")

	cfg, err := ParseConfig("/opt/vendor/libsdf.so", mustQuery(t, "index=2&key=enc&pin-env=SDF_TEST_PIN&sessions=16&timeout=750ms&profile=legacy&lock-thread=true"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Library != "/opt/vendor/libsdf.so" || cfg.Index != 2 || cfg.Usage != UsageEnc || string(cfg.PIN) != "env-pin-12" ||
		cfg.PINSource != "environment variable SDF_TEST_PIN" || cfg.Sessions != 16 || cfg.Timeout != 750*time.Millisecond ||
		!cfg.LockThread || cfg.Profile != Profiles["legacy"] {
		t.Errorf("parsed %+v", cfg)
	}

	cfg, err = ParseConfig("/lib.so", mustQuery(t, "index=1&key=sign&pin-file="+pinFile))
	if err != nil {
		t.Fatal(err)
	}
	if string(cfg.PIN) != "card-pin-1" || cfg.Sessions != DefaultSessions || cfg.Timeout != DefaultTimeout ||
		cfg.LockThread || cfg.Profile != Profiles[DefaultProfile] {
		t.Errorf("defaults: %+v", cfg)
	}

	cfg, err = ParseConfig("/lib.so", mustQuery(t, "index=1&key=enc&profile=tongsuo&decrypt=v4&alg-ids=legacy&coord=32&cipher=2008"))
	if err != nil {
		t.Fatal(err)
	}
	want := Profile{Name: "tongsuo", CoordLen: 32, Cipher: Cipher2008, AlgIDs: AlgIDsLegacy, Decrypt: DecryptV4}
	if cfg.Profile != want || cfg.PIN != nil {
		t.Errorf("overrides: got %v pin %q, want %v", cfg.Profile, cfg.PIN, want)
	}
}

func TestParseConfigErrors(t *testing.T) {
	t.Setenv("SDF_EMPTY_PIN", "")
	tests := []struct{ query, want string }{
		{"key=sign", "index= is missing"},
		{"index=0&key=sign", "index=0 is the device's own key"},
		{"index=x&key=sign", `index="x" is not a number`},
		{"index=1", "key= is missing"},
		{"index=1&key=both", `key="both"`},
		{"index=1&key=sign&pin=12345678", "may not be written in the key reference"},
		{"index=1&key=sign&pin-env=SDF_NOT_SET_ANYWHERE", "SDF_NOT_SET_ANYWHERE (named by pin-env) is not set"},
		{"index=1&key=sign&pin-env=SDF_EMPTY_PIN", "is empty"},
		{"index=1&key=sign&pin-file=/nonexistent/pin", "reading pin-file /nonexistent/pin"},
		{"index=1&key=sign&pin-env=A&pin-file=/b", "either pin-env or pin-file"},
		{"index=1&key=sign&sessions=0", `sessions="0"`},
		{"index=1&key=sign&sessions=5000", `sessions="5000"`},
		{"index=1&key=sign&timeout=soon", `timeout="soon"`},
		{"index=1&key=sign&timeout=-1s", `timeout="-1s"`},
		{"index=1&key=sign&profile=acme", `profile="acme" is not known (known: legacy, sansec2008, standard, tongsuo)`},
		{"index=1&key=sign&decrypt=v9", `decrypt="v9"`},
		{"index=1&key=sign&alg-ids=2023", `alg-ids="2023"`},
		{"index=1&key=sign&coord=48", `coord="48"`},
		{"index=1&key=sign&cipher=flex", `cipher="flex"`},
		{"index=1&key=sign&lock-thread=maybe", `lock-thread="maybe"`},
		{"index=1&key=sign&sesions=4", `unknown parameter "sesions"`},
		{"index=1&index=2&key=sign", "parameter index given 2 times"},
	}
	for _, tc := range tests {
		_, err := ParseConfig("/lib.so", mustQuery(t, tc.query))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.query, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "12345678") {
			t.Errorf("%s: the error shows the PIN: %v", tc.query, err)
		}
	}
	if _, err := ParseConfig("", url.Values{}); err == nil || !strings.Contains(err.Error(), "no library path") {
		t.Errorf("empty path: %v", err)
	}
}

func mustQuery(t *testing.T, q string) url.Values {
	t.Helper()
	v, err := url.ParseQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
