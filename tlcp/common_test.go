package tlcp

import (
	"bytes"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"
)

// TestCloneCopiesEveryField sets every exported field of a Config and
// checks that Clone carries each of them over, so that a field added later
// and forgotten in Clone fails here.
func TestCloneCopiesEveryField(t *testing.T) {
	var c Config
	v := reflect.ValueOf(&c).Elem()
	typ := v.Type()
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		switch f.Name {
		case "Rand":
			fv.Set(reflect.ValueOf(bytes.NewReader(nil)))
		case "Time":
			c.Time = time.Now
		case "Certificates":
			c.Certificates = []Certificate{{SignCertificate: [][]byte{{1}}}}
		case "RootCAs", "ClientCAs":
			fv.Set(reflect.ValueOf(smx509.NewCertPool()))
		case "ClientAuth":
			c.ClientAuth = RequireAndVerifyClientCert
		case "CipherSuites":
			c.CipherSuites = []uint16{ECC_SM4_CBC_SM3}
		case "NextProtos":
			c.NextProtos = []string{"h2"}
		case "SessionCache":
			c.SessionCache = NewLRUSessionCache(1, 0)
		case "ClientSessionCache":
			c.ClientSessionCache = NewLRUClientSessionCache(1, 0)
		default:
			switch fv.Kind() {
			case reflect.Bool:
				fv.SetBool(true)
			case reflect.String:
				fv.SetString("x")
			case reflect.Func:
				fv.Set(reflect.MakeFunc(fv.Type(), func([]reflect.Value) []reflect.Value { return nil }))
			default:
				t.Fatalf("field %s of kind %s: teach this test how to set it", f.Name, fv.Kind())
			}
		}
	}
	clone := reflect.ValueOf(c.Clone()).Elem()
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		want, got := v.Field(i), clone.Field(i)
		var same bool
		switch want.Kind() {
		case reflect.Func, reflect.Pointer:
			same = want.Pointer() == got.Pointer()
		case reflect.Interface:
			// Shared, not copied: a cache or a source of randomness.
			same = want.Interface() == got.Interface()
		default:
			same = reflect.DeepEqual(want.Interface(), got.Interface())
		}
		if !same {
			t.Errorf("Clone does not copy %s", f.Name)
		}
	}
}

// TestCloneAllocatesNoSessionTable: cloning a Config (as Dial does for
// a Config without ServerName, and as callers do for each upstream) shares
// the default server session cache, but a client never stores a session
// there: the cache must not cost its full table (megabytes) until a server
// stores a session in it.
func TestCloneAllocatesNoSessionTable(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 4 {
		cfg := &Config{ServerName: "server.test"}
		if cfg.Clone().SessionCache == nil {
			t.Fatal("the clone shares no session cache")
		}
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 256<<10 {
		t.Fatalf("4 clones allocated %d bytes", n)
	}
}
