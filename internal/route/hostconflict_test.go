package route

import (
	"net/http"
	"testing"

	"github.com/gmgate/gmgate/internal/hostname"
)

func TestHostConflict(t *testing.T) {
	for _, tc := range []struct {
		proto     int
		authority string
		hosts     []string
		want      bool
	}{
		{2, "api.example.cn", nil, false},
		{2, "api.example.cn", []string{"api.example.cn"}, false},
		{2, "api.example.cn", []string{"API.Example.CN."}, false},
		{2, "api.example.cn:8443", []string{"api.example.cn:8443"}, false},
		{2, "api.example.cn", []string{"www.example.cn"}, true},
		{2, "api.example.cn", []string{"api.example.cn:8443"}, true},
		{2, "api.example.cn", []string{"api.example.cn", "api.example.cn"}, true},
		{2, "api.example.cn", []string{"api.example.cn x"}, true},
		// HTTP/1 has one Host, which net/http takes out of the header.
		{1, "api.example.cn", []string{"www.example.cn"}, false},
	} {
		r := &http.Request{ProtoMajor: tc.proto, Host: tc.authority, Header: http.Header{}}
		if tc.hosts != nil {
			r.Header["Host"] = tc.hosts
		}
		h, ok := hostname.ParseAuthority(tc.authority)
		if !ok {
			t.Fatal(tc.authority)
		}
		if got := HostConflict(r, h); got != tc.want {
			t.Errorf("HTTP/%d :authority %q, Host %q: conflict %v, want %v", tc.proto, tc.authority, tc.hosts, got, tc.want)
		}
	}
}
