package proxy

import (
	"testing"

	"github.com/gmgate/gmgate/internal/route"
)

func TestSiteIndexLookup(t *testing.T) {
	api := &site{name: "api", hosts: []string{"api.example.cn"}, isDefault: true}
	www := &site{name: "www", hosts: []string{"*.example.cn", "www.example.com"}}
	img := &site{name: "img", hosts: []string{"*.img.example.cn"}}
	x := newSiteIndex([]*site{api, www, img}, func(*site) bool { return true })
	for name, want := range map[string]*site{
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
		h, ok := route.ParseAuthority(name)
		var got *site
		if ok || name == "" {
			got = x.lookup(h.Name)
		}
		if got != want {
			t.Errorf("lookup(%q) = %v, want %v", name, got, want)
		}
	}
	noDefault := newSiteIndex([]*site{www}, func(*site) bool { return true })
	if got := noDefault.lookup("other.cn"); got != nil {
		t.Errorf("without a default: %v", got)
	}
	if n := testing.AllocsPerRun(100, func() {
		h, _ := route.ParseAuthority("x.img.example.cn:443")
		x.lookup(h.Name)
	}); n != 0 {
		t.Errorf("lookup allocates %v times", n)
	}
}
