package proxy

import "testing"

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
		"evil.com:1:2":        api,
	} {
		if got := x.lookup(name); got != want {
			t.Errorf("lookup(%q) = %v, want %s", name, got, want.name)
		}
	}
	noDefault := newSiteIndex([]*site{www}, func(*site) bool { return true })
	if got := noDefault.lookup("other.cn"); got != nil {
		t.Errorf("without a default: %v", got)
	}
	if n := testing.AllocsPerRun(100, func() { x.lookup("x.img.example.cn:443") }); n != 0 {
		t.Errorf("lookup allocates %v times", n)
	}
}
