//go:build cgo

package sdf

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// The prototypes of GM/T 0018, with the return value read as 32 bits
// whatever the vendor's header calls it.
typedef int (*sdf_open_device_fn)(void **);
typedef int (*sdf_close_fn)(void *);
typedef int (*sdf_open_session_fn)(void *, void **);
typedef int (*sdf_access_right_fn)(void *, unsigned int, unsigned char *, unsigned int);
typedef int (*sdf_release_right_fn)(void *, unsigned int);
typedef int (*sdf_export_pub_fn)(void *, unsigned int, void *);
typedef int (*sdf_sign_fn)(void *, unsigned int, unsigned char *, unsigned int, void *);
typedef int (*sdf_device_info_fn)(void *, void *);
typedef int (*sdf_decrypt_v1_fn)(void *, unsigned int, unsigned int, void *, unsigned char *, unsigned int *);
typedef int (*sdf_decrypt_v2_fn)(void *, unsigned int, void *, unsigned char *, unsigned int *);
typedef int (*sdf_decrypt_v3_fn)(void *, unsigned int, unsigned int, void *, unsigned char *, unsigned int *);
typedef int (*sdf_decrypt_v4_fn)(void *, unsigned int, unsigned int, unsigned char *, unsigned int *, void *);

typedef struct {
	void *dl;
	void *fn[16];
} gmgate_sdf;

static gmgate_sdf *gmgate_sdf_open(const char *path, char *err, size_t errlen) {
	dlerror();
	void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (dl == NULL) {
		const char *e = dlerror();
		strncpy(err, e ? e : "dlopen failed", errlen - 1);
		err[errlen - 1] = 0;
		return NULL;
	}
	gmgate_sdf *t = calloc(1, sizeof(*t));
	if (t == NULL) {
		dlclose(dl);
		strncpy(err, "out of memory", errlen - 1);
		return NULL;
	}
	t->dl = dl;
	return t;
}

static int gmgate_sdf_resolve(gmgate_sdf *t, int i, const char *name) {
	t->fn[i] = dlsym(t->dl, name);
	return t->fn[i] != NULL;
}

static int gmgate_open_device(gmgate_sdf *t, int i, uintptr_t *dev) {
	void *h = NULL;
	int rv = ((sdf_open_device_fn)t->fn[i])(&h);
	*dev = (uintptr_t)h;
	return rv;
}

static int gmgate_close(gmgate_sdf *t, int i, uintptr_t h) {
	return ((sdf_close_fn)t->fn[i])((void *)h);
}

static int gmgate_open_session(gmgate_sdf *t, int i, uintptr_t dev, uintptr_t *sess) {
	void *h = NULL;
	int rv = ((sdf_open_session_fn)t->fn[i])((void *)dev, &h);
	*sess = (uintptr_t)h;
	return rv;
}

static int gmgate_access_right(gmgate_sdf *t, int i, uintptr_t s, unsigned int idx, unsigned char *pin, unsigned int n) {
	return ((sdf_access_right_fn)t->fn[i])((void *)s, idx, pin, n);
}

static int gmgate_release_right(gmgate_sdf *t, int i, uintptr_t s, unsigned int idx) {
	return ((sdf_release_right_fn)t->fn[i])((void *)s, idx);
}

static int gmgate_export_pub(gmgate_sdf *t, int i, uintptr_t s, unsigned int idx, void *out) {
	return ((sdf_export_pub_fn)t->fn[i])((void *)s, idx, out);
}

static int gmgate_sign(gmgate_sdf *t, int i, uintptr_t s, unsigned int idx, unsigned char *e, unsigned int n, void *sig) {
	return ((sdf_sign_fn)t->fn[i])((void *)s, idx, e, n, sig);
}

static int gmgate_device_info(gmgate_sdf *t, int i, uintptr_t s, void *out) {
	return ((sdf_device_info_fn)t->fn[i])((void *)s, out);
}

static int gmgate_decrypt(gmgate_sdf *t, int i, int variant, uintptr_t s, unsigned int alg, unsigned int idx,
		void *cipher, unsigned char *out, unsigned int *outlen) {
	switch (variant) {
	case 1: return ((sdf_decrypt_v1_fn)t->fn[i])((void *)s, idx, alg, cipher, out, outlen);
	case 2: return ((sdf_decrypt_v2_fn)t->fn[i])((void *)s, idx, cipher, out, outlen);
	case 3: return ((sdf_decrypt_v3_fn)t->fn[i])((void *)s, alg, idx, cipher, out, outlen);
	case 4: return ((sdf_decrypt_v4_fn)t->fn[i])((void *)s, idx, alg, out, outlen, cipher);
	}
	return -1;
}
*/
import "C"

import (
	"fmt"
	"os"
	"strings"
	"unsafe"
)

// cLibrary is an SDF library loaded with dlopen. It is never unloaded:
// vendor libraries start threads and keep connections that do not survive
// dlclose.
type cLibrary struct {
	file string
	t    *C.gmgate_sdf
	have [fnCount]bool
}

func loadLibrary(path string) (library, error) {
	if strings.Contains(path, "/") {
		if _, err := os.Stat(path); err != nil {
			if os.IsNotExist(err) {
				return nil, fmt.Errorf("SDF library %s does not exist; check the path after sdf: (the vendor's libsdf.so)", path)
			}
			return nil, fmt.Errorf("SDF library %s: %v", path, err)
		}
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var errbuf [512]C.char
	t := C.gmgate_sdf_open(cpath, &errbuf[0], C.size_t(len(errbuf)))
	if t == nil {
		return nil, fmt.Errorf("cannot load SDF library %s: %s", path, C.GoString(&errbuf[0]))
	}
	l := &cLibrary{file: path, t: t}
	var missing []string
	for i, f := range functions {
		name := C.CString(f.name)
		l.have[i] = C.gmgate_sdf_resolve(t, C.int(i), name) != 0
		C.free(unsafe.Pointer(name))
		if !l.have[i] && f.required {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("SDF library %s lacks the required function(s) %s; is it the vendor's GM/T 0018 SDF library (not an SKF or PKCS#11 one)?", path, strings.Join(missing, ", "))
	}
	return l, nil
}

func (l *cLibrary) path() string    { return l.file }
func (l *cLibrary) has(fn int) bool { return l.have[fn] }

func check(fn int, rv C.int) error {
	if rv == 0 {
		return nil
	}
	return &Error{Func: functions[fn].name, Code: uint32(rv)}
}

func bytePtr(b []byte) *C.uchar { return (*C.uchar)(unsafe.Pointer(&b[0])) }

func (l *cLibrary) openDevice() (uintptr, error) {
	var h C.uintptr_t
	rv := C.gmgate_open_device(l.t, fnOpenDevice, &h)
	return uintptr(h), check(fnOpenDevice, rv)
}

func (l *cLibrary) closeDevice(dev uintptr) error {
	return check(fnCloseDevice, C.gmgate_close(l.t, fnCloseDevice, C.uintptr_t(dev)))
}

func (l *cLibrary) openSession(dev uintptr) (uintptr, error) {
	var h C.uintptr_t
	rv := C.gmgate_open_session(l.t, fnOpenSession, C.uintptr_t(dev), &h)
	return uintptr(h), check(fnOpenSession, rv)
}

func (l *cLibrary) closeSession(sess uintptr) error {
	return check(fnCloseSession, C.gmgate_close(l.t, fnCloseSession, C.uintptr_t(sess)))
}

func (l *cLibrary) getAccessRight(sess uintptr, index uint32, pin []byte) error {
	// The PIN goes through C memory that is wiped right after the call.
	cpin := (*C.uchar)(C.CBytes(pin))
	defer func() {
		C.memset(unsafe.Pointer(cpin), 0, C.size_t(len(pin)))
		C.free(unsafe.Pointer(cpin))
	}()
	rv := C.gmgate_access_right(l.t, fnGetPrivateKeyAccessRight, C.uintptr_t(sess), C.uint(index), cpin, C.uint(len(pin)))
	return check(fnGetPrivateKeyAccessRight, rv)
}

func (l *cLibrary) releaseAccessRight(sess uintptr, index uint32) error {
	rv := C.gmgate_release_right(l.t, fnReleasePrivateKeyAccessRight, C.uintptr_t(sess), C.uint(index))
	return check(fnReleasePrivateKeyAccessRight, rv)
}

func (l *cLibrary) exportPublicKey(sess uintptr, u Usage, index uint32, out []byte) error {
	fn := fnExportSignPublicKey
	if u == UsageEnc {
		fn = fnExportEncPublicKey
	}
	rv := C.gmgate_export_pub(l.t, C.int(fn), C.uintptr_t(sess), C.uint(index), unsafe.Pointer(&out[0]))
	return check(fn, rv)
}

func (l *cLibrary) internalSign(sess uintptr, index uint32, e, out []byte) error {
	rv := C.gmgate_sign(l.t, fnInternalSign, C.uintptr_t(sess), C.uint(index), bytePtr(e), C.uint(len(e)), unsafe.Pointer(&out[0]))
	return check(fnInternalSign, rv)
}

func (l *cLibrary) internalDecrypt(sess uintptr, v DecryptVariant, alg, index uint32, cipher, out []byte) (int, error) {
	n := C.uint(len(out))
	rv := C.gmgate_decrypt(l.t, fnInternalDecrypt, C.int(v), C.uintptr_t(sess), C.uint(alg), C.uint(index),
		unsafe.Pointer(&cipher[0]), bytePtr(out), &n)
	if err := check(fnInternalDecrypt, rv); err != nil {
		return 0, err
	}
	if int(n) > len(out) {
		return 0, fmt.Errorf("SDF_InternalDecrypt_ECC reported %d bytes of plaintext, more than the %d-byte buffer", int(n), len(out))
	}
	return int(n), nil
}

func (l *cLibrary) deviceInfo(sess uintptr, out []byte) error {
	return check(fnGetDeviceInfo, C.gmgate_device_info(l.t, fnGetDeviceInfo, C.uintptr_t(sess), unsafe.Pointer(&out[0])))
}
