package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionCPU runs gmgate version --cpu as an operator would, on this
// CPU and with AES and SM4 instructions turned off (which leaves every
// CPU, amd64 or arm64, with SM4 from lookup tables: turning off AES alone
// leaves an arm64 core with SM4 instructions constant-time), and checks that it names the
// implementations, says which are not constant-time and gives the suite
// order that follows from them.
func TestVersionCPU(t *testing.T) {
	for _, tc := range []struct {
		disable string
		want    []string
		notWant []string
	}{
		{"", []string{"features:", "sm4-cbc-encrypt:", "sm4-gcm:", "sm3:", "sm2:", "suite order:"}, nil},
		{"aes,sm4,bogus", []string{"turned off by GMGATE_CPU_DISABLE: aes sm4", "NOT constant-time", "suite order:     ECC_SM4_CBC_SM3, ECC_SM4_GCM_SM3", `unknown CPU feature "bogus"`, "warning: SM4 is not constant-time"}, nil},
	} {
		cmd := gmgateCommand("version", "--cpu")
		cmd.Env = append(cmd.Env, "GMGATE_CPU_DISABLE="+tc.disable)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("GMGATE_CPU_DISABLE=%q: no %q in\n%s", tc.disable, w, out)
			}
		}
	}
}

// TestServeWarnsWithoutConstantTimeSM4 starts gmgate serve on a CPU that
// (with AES and SM4 instructions turned off) has no constant-time SM4 and waits for the one
// warning that says so.
func TestServeWarnsWithoutConstantTimeSM4(t *testing.T) {
	dir := t.TempDir()
	files := writeDualPair(t, dir)
	cfgFile := filepath.Join(dir, "gmgate.yaml")
	cfg := fmt.Sprintf(`admin: {listen: "127.0.0.1:0"}
log: {access: "off"}
listeners:
  - name: edge
    listen: "127.0.0.1:0"
    tlcp:
      sign_cert: %s
      sign_key: %s
      enc_cert: %s
      enc_key: %s
    routes: [{upstream: app}]
upstreams:
  app: {targets: ["http://127.0.0.1:9"]}
`, files.SignCert, files.SignKey, files.EncCert, files.EncKey)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := gmgateCommand("serve", "-c", cfgFile)
	cmd.Env = append(cmd.Env, "GMGATE_CPU_DISABLE=aes,sm4")
	s := startServe(t, cmd, "edge")
	s.waitLog(t, "SM4 is not constant-time on this CPU")
	if n := strings.Count(s.logs.String(), "SM4 is not constant-time on this CPU"); n != 1 {
		t.Fatalf("the warning came %d times", n)
	}
}
