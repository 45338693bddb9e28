//go:build cgo

package softsdf

/*
#cgo LDFLAGS: -ldl -lpthread
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

typedef int (*control_fn)(const char *, long);
typedef int (*stats_fn)(unsigned long long *, int);
typedef int (*bench_fn)(int, const char *, const char *, long);
typedef int (*open_device_fn)(void **);
typedef int (*close_fn)(void *);
typedef int (*open_session_fn)(void *, void **);
typedef int (*access_fn)(void *, unsigned int, unsigned char *, unsigned int);
typedef int (*sign_fn)(void *, unsigned int, unsigned char *, unsigned int, void *);
typedef int (*decrypt_fn)(void *, unsigned int, unsigned int, void *, unsigned char *, unsigned int *);

static void *softsdf_open(const char *path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }
static const char *softsdf_error(void) { const char *e = dlerror(); return e ? e : "dlopen failed"; }

static int softsdf_control(void *dl, const char *name, long value) {
	control_fn f = (control_fn)dlsym(dl, "SOFTSDF_Control");
	return f ? f(name, value) : -2;
}

static int softsdf_stats(void *dl, unsigned long long *out, int n) {
	stats_fn f = (stats_fn)dlsym(dl, "SOFTSDF_Stats");
	return f ? f(out, n) : -2;
}

static int softsdf_bench_direct(void *dl, int op, const char *key, const char *pin, long n) {
	bench_fn f = (bench_fn)dlsym(dl, "SOFTSDF_BenchDirect");
	return f ? f(op, key, pin, n) : -2;
}

// softsdf_bench_sdf runs n private-key operations through the SDF API
// from C, on one session: the SDF path without Go. The cipher for op 1 is
// an ECCCipher the caller laid out (V1 prototype, 2012 algorithm ID).
struct sdf_api {
	open_device_fn od;
	close_fn cd;
	open_session_fn os;
	close_fn cs;
	access_fn ac;
	sign_fn sg;
	decrypt_fn dc;
};

static int resolve(void *dl, struct sdf_api *a) {
	a->od = (open_device_fn)dlsym(dl, "SDF_OpenDevice");
	a->cd = (close_fn)dlsym(dl, "SDF_CloseDevice");
	a->os = (open_session_fn)dlsym(dl, "SDF_OpenSession");
	a->cs = (close_fn)dlsym(dl, "SDF_CloseSession");
	a->ac = (access_fn)dlsym(dl, "SDF_GetPrivateKeyAccessRight");
	a->sg = (sign_fn)dlsym(dl, "SDF_InternalSign_ECC");
	a->dc = (decrypt_fn)dlsym(dl, "SDF_InternalDecrypt_ECC");
	return a->od && a->cd && a->os && a->cs && a->ac && a->sg && a->dc;
}

static int softsdf_bench_sdf(void *dl, int op, unsigned int idx, unsigned char *pin, unsigned int pinlen,
		unsigned char *e, void *cipher, long n) {
	struct sdf_api a;
	if (!resolve(dl, &a))
		return -2;
	void *dev = NULL, *sess = NULL;
	int rv = a.od(&dev);
	if (rv != 0)
		return rv;
	if ((rv = a.os(dev, &sess)) == 0 && (rv = a.ac(sess, idx, pin, pinlen)) == 0) {
		unsigned char sig[128], pt[256];
		for (long i = 0; rv == 0 && i < n; i++) {
			if (op == 0)
				rv = a.sg(sess, idx, e, 32, sig);
			else {
				unsigned int len = sizeof(pt);
				rv = a.dc(sess, idx, 0x00020800, cipher, pt, &len);
			}
		}
	}
	if (sess)
		a.cs(sess);
	a.cd(dev);
	return rv;
}

struct concurrent_call {
	sign_fn sg;
	void *sess;
	unsigned int idx;
	unsigned char *e;
	int rv;
};

static void *concurrent_sign(void *p) {
	struct concurrent_call *c = p;
	unsigned char sig[128];
	c->rv = c->sg(c->sess, c->idx, c->e, 32, sig);
	return NULL;
}

// softsdf_probe makes calls a card must refuse and writes their return
// codes into out: [0] a second SDF_OpenDevice, [1] a session handle that
// was never opened, [2] a 31-byte digest, [3] signing without the access
// right, [4] a second call on a session that is busy, [5] the wrong PIN,
// [6] index 0, [7] the busy call itself.
static int softsdf_probe(void *dl, unsigned int idx, unsigned char *pin, unsigned int pinlen, unsigned int *out) {
	struct sdf_api a;
	if (!resolve(dl, &a))
		return -2;
	open_device_fn od = a.od;
	close_fn cd = a.cd, cs = a.cs;
	open_session_fn os = a.os;
	access_fn ac = a.ac;
	sign_fn sg = a.sg;
	void *dev = NULL, *dev2 = NULL, *sess = NULL;
	int rv = od(&dev);
	if (rv != 0)
		return rv;
	unsigned char e[32] = {1}, sig[128];
	int bogus;
	out[0] = od(&dev2);
	out[1] = sg(&bogus, idx, e, 32, sig);
	if ((rv = os(dev, &sess)) != 0) {
		cd(dev);
		return rv;
	}
	out[3] = sg(sess, idx, e, 32, sig);
	unsigned char wrong[] = "wrong-pin-0";
	out[5] = ac(sess, idx, wrong, 11);
	out[6] = ac(sess, 0, pin, pinlen);
	if ((rv = ac(sess, idx, pin, pinlen)) == 0) {
		out[2] = sg(sess, idx, e, 31, sig);
		// The first call is held in the library (its hang switch) until
		// the second has been made; the second waits until the first
		// has claimed the session (the calls-in-flight counter), for
		// at most ten seconds.
		struct concurrent_call c = {sg, sess, idx, e, -1};
		pthread_t th;
		int held = softsdf_control(dl, "hang", 1) == 0;
		pthread_create(&th, NULL, concurrent_sign, &c);
		unsigned long long st[8] = {0};
		struct timespec ms = {0, 1000 * 1000};
		for (int i = 0; i < 10000 && softsdf_stats(dl, st, 8) >= 6 && st[5] == 0; i++)
			nanosleep(&ms, NULL);
		out[4] = sg(sess, idx, e, 32, sig);
		if (held)
			softsdf_control(dl, "hang", 0);
		pthread_join(th, NULL);
		out[7] = c.rv;
	}
	cs(sess);
	cd(dev);
	return rv;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Lib is a loaded instance of the library.
type Lib struct{ dl unsafe.Pointer }

// Load loads the library at path, or finds the instance already loaded
// from that path (by the backend under test, for example).
func Load(path string) (*Lib, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	dl := C.softsdf_open(cpath)
	if dl == nil {
		return nil, fmt.Errorf("loading %s: %s", path, C.GoString(C.softsdf_error()))
	}
	return &Lib{dl: dl}, nil
}

// Control sets a fault or latency switch (see softsdf.c).
func (l *Lib) Control(name string, value int64) error {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	if rv := C.softsdf_control(l.dl, cname, C.long(value)); rv != 0 {
		return fmt.Errorf("SOFTSDF_Control(%s): %d", name, int(rv))
	}
	return nil
}

// Stats reads the counters.
func (l *Lib) Stats() Stats {
	var v [16]C.ulonglong
	C.softsdf_stats(l.dl, &v[0], C.int(len(v)))
	return Stats{
		Signs: uint64(v[0]), Decrypts: uint64(v[1]),
		SessionsOpen: uint64(v[2]), SessionsOpenMax: uint64(v[3]), SessionsOpened: uint64(v[4]),
		CallsNow: uint64(v[5]), CallsMax: uint64(v[6]), BusyViolations: uint64(v[7]),
		DeviceOpens: uint64(v[8]), AccessGranted: uint64(v[9]), Faults: uint64(v[10]),
		AccessDenied: uint64(v[11]), DeviceCloses: uint64(v[12]),
	}
}

// BenchDirect runs n OpenSSL SM2 operations in C (op 0 sign, 1 decrypt)
// with the private key in keyFile.
func (l *Lib) BenchDirect(op int, keyFile, pin string, n int) error {
	ck, cp := C.CString(keyFile), C.CString(pin)
	defer C.free(unsafe.Pointer(ck))
	defer C.free(unsafe.Pointer(cp))
	if rv := C.softsdf_bench_direct(l.dl, C.int(op), ck, cp, C.long(n)); rv != 0 {
		return fmt.Errorf("SOFTSDF_BenchDirect: %d", int(rv))
	}
	return nil
}

// BenchSDF runs n operations through the SDF API from C on one session of
// a device it opens itself (so the instance must not be open elsewhere):
// op 0 signs e, op 1 decrypts cipher (an ECCCipher in the standard
// layout; the library must use the V1 prototype and 2012 IDs).
func (l *Lib) BenchSDF(op int, index uint32, pin, e, cipher []byte, n int) error {
	cpin := C.CBytes(pin)
	ce := C.CBytes(e)
	cc := C.CBytes(cipher)
	defer C.free(cpin)
	defer C.free(ce)
	defer C.free(cc)
	rv := C.softsdf_bench_sdf(l.dl, C.int(op), C.uint(index), (*C.uchar)(cpin), C.uint(len(pin)), (*C.uchar)(ce), cc, C.long(n))
	if rv != 0 {
		return fmt.Errorf("SDF call from C returned 0x%08X", uint32(rv))
	}
	return nil
}

// Probe results, as GM/T 0018 return codes.
type Probe struct {
	SecondOpenDevice, UnknownSession, ShortDigest, NoAccessRight uint32
	BusySession, WrongPIN, IndexZero, BusyCallItself             uint32
}

// Probe opens the device of this instance (which must not be open
// elsewhere) and makes calls a card must refuse.
func (l *Lib) Probe(index uint32, pin []byte) (Probe, error) {
	cpin := C.CBytes(pin)
	defer C.free(cpin)
	var out [8]C.uint
	if rv := C.softsdf_probe(l.dl, C.uint(index), (*C.uchar)(cpin), C.uint(len(pin)), &out[0]); rv != 0 {
		return Probe{}, fmt.Errorf("probe: 0x%08X", uint32(rv))
	}
	return Probe{uint32(out[0]), uint32(out[1]), uint32(out[2]), uint32(out[3]), uint32(out[4]), uint32(out[5]), uint32(out[6]), uint32(out[7])}, nil
}
