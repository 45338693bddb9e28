package route

import (
	"testing"

	"github.com/gmgate/gmgate/internal/hostname"
)

func TestSiteIndexLookup(t *testing.T) {
	api := &Site{Name: "api", Hosts: []string{"api.example.cn"}, IsDefault: true}
	www := &Site{Name: "www", Hosts: []string{"*.example.cn", "www.example.com"}}
	img := &Site{Name: "img", Hosts: []string{"*.img.example.cn"}}
	x := NewSiteIndex([]*Site{api, www, img}, func(*Site) bool { return true })
	for name, want := range map[string]*Site{
		"api.example.cn":      api,
		"API.Example.CN.":     api,
		"api.example.cn:8443": api,
		"a.example.cn":        www,
		"a.b.example.cn":      www,
		"x.img.example.cn":    img, // the longer wildcard
		"img.example.cn":      www,
		"example.cn":          api, // the default: the wildcard needs a label
		"www.example.com":     www,
		"":                    api,
		"[::1]:443":           api,
		"10.0.0.1:443":        api,
		"evil.com:1:2":        nil, // not a host: answered 400 before any lookup
		"www.example.com:":    nil,
	} {
		h, ok := hostname.ParseAuthority(name)
		var got *Site
		if ok || name == "" {
			got = x.Lookup(h.Name)
		}
		if got != want {
			t.Errorf("lookup(%q) = %v, want %v", name, got, want)
		}
	}
	noDefault := NewSiteIndex([]*Site{www}, func(*Site) bool { return true })
	if got := noDefault.Lookup("other.cn"); got != nil {
		t.Errorf("without a default: %v", got)
	}
	if n := testing.AllocsPerRun(100, func() {
		h, _ := hostname.ParseAuthority("x.img.example.cn:443")
		x.Lookup(h.Name)
	}); n != 0 {
		t.Errorf("lookup allocates %v times", n)
	}
}

// A request's host must choose the site its connection was made for. On
// the default site's connection that includes any host no site lists
// (an address, a name the operator did not list); a host another site
// lists is misdirected everywhere but on that site's connections.
func TestSiteTableForRequest(t *testing.T) {
	api := &Site{Name: "api", Hosts: []string{"api.example.cn"}, IsDefault: true}
	www := &Site{Name: "www", Hosts: []string{"*.www.example.cn", "www.example.cn"}}
	table := NewSiteTable([]*Site{api, www})
	for _, tc := range []struct {
		host, conn string
		want       *Site
	}{
		{"api.example.cn", "api", api},
		{"www.example.cn", "www", www},
		{"img.www.example.cn", "www", www},
		{"www.example.cn", "api", nil}, // another site's host
		{"api.example.cn", "www", nil},
		// No site lists these: the default site serves them on its
		// own connections only.
		{"10.0.0.5", "api", api},
		{"other.example.org", "api", api},
		{"", "api", api}, // HTTP/1.0 without a host
		{"10.0.0.5", "www", nil},
		{"other.example.org", "www", nil},
		{"", "www", nil},
	} {
		if got := table.ForRequest(tc.host, tc.conn); got != tc.want {
			t.Errorf("host %q on a connection of %s: %v, want %v", tc.host, tc.conn, got, tc.want)
		}
	}
	// Without a default site, a host no site lists is misdirected on
	// every connection.
	strict := NewSiteTable([]*Site{{Name: "api", Hosts: []string{"api.example.cn"}}, www})
	if got := strict.ForRequest("10.0.0.5", "api"); got != nil {
		t.Errorf("without a default site, 10.0.0.5 on api's connection: %v", got)
	}
}
