package keyref

import (
	"strings"
	"testing"
)

func TestInlineSecret(t *testing.T) {
	for _, c := range []struct {
		query string
		want  string // "" for none
	}{
		{"password=hunter2", "password"},
		{"pin=1234", "pin"},
		{"Password=hunter2", "password"},
		{"PIN=1234", "pin"},
		{"index=1&Pin=1234&key=sign", "pin"},
		{"pin%3D1234", "pin"},
		{"password%3dhunter2", "password"},
		{"%70in=1234", "pin"},
		{"%2570in=1234", "pin"},
		{"pass%77ord=x", "password"},
		{"index=1;pin=1234", "pin"},
		{"pin+=1234", "pin"},
		{" pin =1234", "pin"},
		{"pin", "pin"},
		{"password-env=PW", ""},
		{"pin-file=/run/secrets/pin&index=2&key=enc", ""},
		{"index=1&key=sign&sessions=4", ""},
		{"pinned=1", ""},
		{"%zz&pin-env=X", ""},
		{"", ""},
	} {
		got, found := InlineSecret(c.query)
		if found != (c.want != "") || got != c.want {
			t.Errorf("InlineSecret(%q) = %q, %v; want %q", c.query, got, found, c.want)
		}
	}
}

func TestRedactHidesTheWholeQuery(t *testing.T) {
	for _, ref := range []string{
		"file:/k.pem?password=hunter2",
		"sdf:/lib.so?index=1&pin%3Dhunter2&key=sign",
		"sdf:/lib.so?index=1&%zz&hunter2",
		"/bare/path?Password=hunter2",
	} {
		got := Redact(ref)
		if strings.Contains(got, "hunter2") || !strings.HasSuffix(got, "?"+Hidden) {
			t.Errorf("Redact(%q) = %q", ref, got)
		}
	}
	if got := Redact("/etc/gmgate/k.pem"); got != "/etc/gmgate/k.pem" {
		t.Errorf("a reference without a query changed: %q", got)
	}
}

func FuzzInlineSecret(f *testing.F) {
	for _, s := range []string{"pin=1", "password%3Dx", "index=1&key=sign", "%2570in=1", "%", "%%%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		name, found := InlineSecret(query)
		if found != (name != "") {
			t.Fatalf("InlineSecret(%q) = %q, %v", query, name, found)
		}
		// Whatever the query, the redacted reference shows none of it.
		if r := Redact("sdf:/lib.so?" + query); r != "sdf:/lib.so?"+Hidden {
			t.Fatalf("Redact kept %q", r)
		}
	})
}
