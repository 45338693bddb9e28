package config

import (
	"strings"
	"testing"
)

// The admin listener off loopback needs a token or client certificates;
// the write actions need the token; TLS files go together.
func TestAdminAccessValidation(t *testing.T) {
	for _, tc := range []struct {
		admin string
		want  string // "" for valid
	}{
		{`{listen: "127.0.0.1:9180"}`, ""},
		{`{listen: "[::1]:9180"}`, ""},
		{`{listen: "localhost:9180"}`, ""},
		{`{listen: "off"}`, ""},
		{`{listen: "0.0.0.0:9180"}`, `gmgate.yaml:1: admin.listen: "0.0.0.0:9180" is not a loopback address, and the admin listener has no access control; set admin.token_file`},
		{`{listen: ":9180"}`, `admin.listen: ":9180" is not a loopback address`},
		{`{listen: "10.0.0.5:9180", token_file: /etc/gmgate/admin.token}`, ""},
		{`{listen: "10.0.0.5:9180", cert: a.crt, key: a.key, client_ca: ca.crt}`, ""},
		{`{listen: "10.0.0.5:9180", client_ca: ca.crt}`, "admin.client_ca: client certificates need the admin listener to speak TLS or TLCP"},
		{`{listen: "10.0.0.5:9180", client_ca: ca.crt, tlcp: {sign_cert: s.crt, sign_key: s.key, enc_cert: e.crt, enc_key: e.key}}`, ""},
		{`{listen: "10.0.0.5:9180", client_ca: ca.crt,
  tlcp: {sign_cert: s.crt, sign_key: s.key, enc_cert: e.crt}}`, "gmgate.yaml:2: admin.tlcp.enc_key: the admin listener's TLCP identity needs a signing and an encryption certificate and key"},
		{`{listen: "127.0.0.1:9180", cert: a.crt}`, "admin.cert: admin.cert and admin.key go together"},
		{`{listen: "127.0.0.1:9180", write_actions: true}`, "admin.write_actions: the write actions are for holders of the bearer token"},
		{`{listen: "127.0.0.1:9180", token_file: t, write_actions: true}`, ""},
	} {
		doc := "admin: " + tc.admin + "\nlisteners: []\n"
		_, err := Parse("gmgate.yaml", []byte(doc))
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if tc.want == "" {
			if strings.Contains(msg, "admin") {
				t.Errorf("%s: %v", tc.admin, err)
			}
			continue
		}
		if !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %v, want %q", tc.admin, err, tc.want)
		}
	}
}
