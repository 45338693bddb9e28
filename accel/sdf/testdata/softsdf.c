/*
 * softsdf: a software SDF device (GM/T 0018) on OpenSSL 3 libcrypto, for
 * testing gmgate's sdf backend without a crypto card. Every signature and
 * decryption it makes comes from OpenSSL, so the Go side is checked
 * against an implementation independent of gmsm.
 *
 * It is as strict as a card: handles are looked up, never trusted; a
 * session serves one call at a time (a second concurrent call gets
 * SDR_STEPERR and is counted); InternalSign takes exactly 32 bytes;
 * private keys need SDF_GetPrivateKeyAccessRight with the PIN first; only
 * one device may be open. It is thread-safe.
 *
 * Keys: $SOFTSDF_KEYDIR/sign-N.pem and enc-N.pem (PKCS#8, encrypted with
 * the PIN) and sign-N.pub.pem, enc-N.pub.pem (SubjectPublicKeyInfo), for
 * index N from 1 to SOFTSDF_MAX_INDEX.
 *
 * Vendor profile, read by SDF_OpenDevice from the environment:
 *   SOFTSDF_COORD=64|32        coordinate field width (default 64)
 *   SOFTSDF_CIPHER=std|2008    ECCCipher layout (default std)
 *   SOFTSDF_ALG_IDS=2012|legacy  SGD_SM2_3 value checked by InternalDecrypt
 *   SOFTSDF_MAX_SESSIONS=N     sessions the "licence" allows (default no limit)
 * The SDF_InternalDecrypt_ECC prototype is chosen when compiling, because
 * a C symbol has one prototype: -DSOFTSDF_DECRYPT_VARIANT=1..4 (default 1).
 * -DSOFTSDF_OMIT_SIGN leaves SDF_InternalSign_ECC out.
 *
 * Faults and latency, from the environment at SDF_OpenDevice and at any
 * time through SOFTSDF_Control(name, value):
 *   SOFTSDF_LATENCY_US / "latency_us"  sleep in every private-key call
 *   SOFTSDF_FAIL_EVERY / "fail_every"  every Nth private-key call fails
 *   SOFTSDF_FAIL_CODE  / "fail_code"   with this code (default SDR_COMMFAIL)
 *   "fail_next"   the next N private-key calls fail
 *   "down" 1|0    every call but the Close ones fails with SDR_COMMFAIL
 *   "reset"       every open session is lost, as after a device reset
 *   "hang" 1|0    private-key calls block (as on a hung link to an HSM)
 *                 until "hang" 0 releases them
 *   "session_fail" CODE  SDF_OpenSession fails with CODE (0: it works), while
 *                 SDF_OpenDevice still works
 * A session whose call failed with SDR_COMMFAIL or SDR_HARDFAIL is lost.
 * SOFTSDF_Stats fills counters (see enum stat).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>

#define SDR_OK 0x0
#define SDR_BASE 0x01000000
#define SDR_UNKNOWERR (SDR_BASE + 0x01)
#define SDR_NOTSUPPORT (SDR_BASE + 0x02)
#define SDR_COMMFAIL (SDR_BASE + 0x03)
#define SDR_HARDFAIL (SDR_BASE + 0x04)
#define SDR_OPENDEVICE (SDR_BASE + 0x05)
#define SDR_OPENSESSION (SDR_BASE + 0x06)
#define SDR_PARDENY (SDR_BASE + 0x07)
#define SDR_KEYNOTEXIST (SDR_BASE + 0x08)
#define SDR_ALGNOTSUPPORT (SDR_BASE + 0x09)
#define SDR_SKOPERR (SDR_BASE + 0x0C)
#define SDR_SIGNERR (SDR_BASE + 0x0D)
#define SDR_STEPERR (SDR_BASE + 0x10)
#define SDR_KEYTYPEERR (SDR_BASE + 0x14)
#define SDR_ENCDATAERR (SDR_BASE + 0x16)
#define SDR_RANDERR (SDR_BASE + 0x17)
#define SDR_PRKRERR (SDR_BASE + 0x18)
#define SDR_NOBUFFER (SDR_BASE + 0x1C)
#define SDR_INARGERR (SDR_BASE + 0x1D)
#define SDR_OUTARGERR (SDR_BASE + 0x1E)

#define SGD_SM2_1 0x00020200
#define SGD_SM2_3 0x00020800
#define SGD_SM2_1_LEGACY 0x00020100
#define SGD_SM2_3_LEGACY 0x00020400
#define SGD_SM3 0x00000001

#define SOFTSDF_MAX_INDEX 64
#define MIN_PIN 8
#define MAX_PIN 256
#define MAX_C2 255
#define C2_2008 136

#ifndef SOFTSDF_DECRYPT_VARIANT
#define SOFTSDF_DECRYPT_VARIANT 1
#endif

#define EXPORT __attribute__((visibility("default")))

enum stat {
	ST_SIGNS,
	ST_DECRYPTS,
	ST_SESSIONS_OPEN,
	ST_SESSIONS_OPEN_MAX,
	ST_SESSIONS_OPENED,
	ST_CALLS_NOW,
	ST_CALLS_MAX,
	ST_BUSY_VIOLATIONS,
	ST_DEVICE_OPENS,
	ST_ACCESS_GRANTED,
	ST_FAULTS,
	ST_ACCESS_DENIED,
	ST_DEVICE_CLOSES,
	ST_COUNT
};

struct session {
	struct session *next;
	uint64_t epoch;
	atomic_int busy;
	EVP_PKEY *sign[SOFTSDF_MAX_INDEX + 1];
	EVP_PKEY *enc[SOFTSDF_MAX_INDEX + 1];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* Device state, under mu. */
static struct {
	int open;
	uint64_t epoch;
	struct session *sessions;
	char keydir[PATH_MAX];
	int coord;
	int cipher2008;
	unsigned int alg_sm2_3;
	unsigned int max_sessions;
} dev;

/* The device handle is the address of this byte. */
static char device_token;

static atomic_uint latency_us, fail_every, fail_next, down, session_fail;
static atomic_uint fail_code = SDR_COMMFAIL;
static atomic_ulong fail_counter;
static atomic_ullong stats[ST_COUNT];

/* hang_on holds private-key calls in inject until it is cleared. */
static pthread_mutex_t hang_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hang_cv = PTHREAD_COND_INITIALIZER;
static int hang_on;

static void stat_max(enum stat now, enum stat max) {
	unsigned long long v = atomic_load(&stats[now]);
	unsigned long long m = atomic_load(&stats[max]);
	while (v > m && !atomic_compare_exchange_weak(&stats[max], &m, v)) {
	}
}

static unsigned int env_uint(const char *name, unsigned int def) {
	const char *v = getenv(name);
	if (v == NULL || *v == 0)
		return def;
	char *end;
	unsigned long n = strtoul(v, &end, 0);
	return *end == 0 ? (unsigned int)n : def;
}

static void read_config(void) {
	const char *dir = getenv("SOFTSDF_KEYDIR");
	snprintf(dev.keydir, sizeof(dev.keydir), "%s", dir ? dir : ".");
	dev.coord = env_uint("SOFTSDF_COORD", 64) == 32 ? 32 : 64;
	const char *c = getenv("SOFTSDF_CIPHER");
	dev.cipher2008 = c != NULL && strcmp(c, "2008") == 0;
	const char *ids = getenv("SOFTSDF_ALG_IDS");
	dev.alg_sm2_3 = ids != NULL && strcmp(ids, "legacy") == 0 ? SGD_SM2_3_LEGACY : SGD_SM2_3;
	dev.max_sessions = env_uint("SOFTSDF_MAX_SESSIONS", 0);
	/* Switches set through SOFTSDF_Control before the device opened stay
	 * unless the environment says otherwise. */
	atomic_store(&latency_us, env_uint("SOFTSDF_LATENCY_US", atomic_load(&latency_us)));
	atomic_store(&fail_every, env_uint("SOFTSDF_FAIL_EVERY", atomic_load(&fail_every)));
	atomic_store(&fail_code, env_uint("SOFTSDF_FAIL_CODE", atomic_load(&fail_code)));
}

static void free_keys(struct session *s) {
	for (int i = 0; i <= SOFTSDF_MAX_INDEX; i++) {
		EVP_PKEY_free(s->sign[i]);
		EVP_PKEY_free(s->enc[i]);
		s->sign[i] = s->enc[i] = NULL;
	}
}

static struct session *find_session(void *h) {
	for (struct session *s = dev.sessions; s != NULL; s = s->next)
		if ((void *)s == h)
			return s;
	return NULL;
}

/* enter claims a live session for one call; leave gives it back. */
static int enter(void *h, struct session **out) {
	int rv = SDR_OK;
	pthread_mutex_lock(&mu);
	struct session *s = find_session(h);
	if (atomic_load(&down))
		rv = SDR_COMMFAIL;
	else if (!dev.open || s == NULL || s->epoch != dev.epoch)
		rv = SDR_OPENSESSION;
	else if (atomic_exchange(&s->busy, 1)) {
		atomic_fetch_add(&stats[ST_BUSY_VIOLATIONS], 1);
		rv = SDR_STEPERR;
	} else
		*out = s;
	pthread_mutex_unlock(&mu);
	if (rv == SDR_OK) {
		atomic_fetch_add(&stats[ST_CALLS_NOW], 1);
		stat_max(ST_CALLS_NOW, ST_CALLS_MAX);
	}
	return rv;
}

static int leave(struct session *s, int rv) {
	if (rv == SDR_COMMFAIL || rv == SDR_HARDFAIL) {
		pthread_mutex_lock(&mu);
		s->epoch = 0; /* the link died with the call */
		pthread_mutex_unlock(&mu);
	}
	atomic_fetch_sub(&stats[ST_CALLS_NOW], 1);
	atomic_store(&s->busy, 0);
	return rv;
}

/* inject applies the configured latency and faults to a private-key call. */
static int inject(void) {
	pthread_mutex_lock(&hang_mu);
	while (hang_on)
		pthread_cond_wait(&hang_cv, &hang_mu);
	pthread_mutex_unlock(&hang_mu);
	unsigned int us = atomic_load(&latency_us);
	if (us > 0) {
		struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
		}
	}
	unsigned int n = atomic_load(&fail_next);
	while (n > 0) {
		if (atomic_compare_exchange_weak(&fail_next, &n, n - 1)) {
			atomic_fetch_add(&stats[ST_FAULTS], 1);
			return (int)atomic_load(&fail_code);
		}
	}
	unsigned int every = atomic_load(&fail_every);
	if (every > 0 && (atomic_fetch_add(&fail_counter, 1) + 1) % every == 0) {
		atomic_fetch_add(&stats[ST_FAULTS], 1);
		return (int)atomic_load(&fail_code);
	}
	return SDR_OK;
}

static int valid_index(unsigned int idx) { return idx >= 1 && idx <= SOFTSDF_MAX_INDEX; }

static void key_path(char *buf, size_t n, const char *kind, unsigned int idx, const char *suffix) {
	char dir[PATH_MAX];
	pthread_mutex_lock(&mu);
	memcpy(dir, dev.keydir, sizeof(dir));
	pthread_mutex_unlock(&mu);
	snprintf(buf, n, "%s/%s-%u%s", dir, kind, idx, suffix);
}

/* load_private reads an encrypted PKCS#8 key: SDR_KEYNOTEXIST when the file
 * is missing, SDR_PRKRERR when the PIN does not decrypt it. */
static int load_private(const char *path, const char *pin, EVP_PKEY **out) {
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return SDR_KEYNOTEXIST;
	EVP_PKEY *k = PEM_read_PrivateKey(f, NULL, NULL, (void *)pin);
	fclose(f);
	ERR_clear_error();
	if (k == NULL)
		return SDR_PRKRERR;
	if (!EVP_PKEY_is_a(k, "SM2")) {
		EVP_PKEY_free(k);
		return SDR_KEYTYPEERR;
	}
	*out = k;
	return SDR_OK;
}

/* put_field writes a 32-byte big-endian value right-aligned into a
 * coordinate field of the profile's width. */
static void put_field(unsigned char *dst, const unsigned char *v32) {
	memset(dst, 0, dev.coord);
	memcpy(dst + dev.coord - 32, v32, 32);
}

/* get_field reads a coordinate field; its padding must be zero. */
static int get_field(const unsigned char *src, unsigned char *v32) {
	for (int i = 0; i < dev.coord - 32; i++)
		if (src[i] != 0)
			return 0;
	memcpy(v32, src + dev.coord - 32, 32);
	return 1;
}

EXPORT int SDF_OpenDevice(void **phDeviceHandle) {
	if (phDeviceHandle == NULL)
		return SDR_INARGERR;
	if (atomic_load(&down))
		return SDR_COMMFAIL;
	int rv = SDR_OK;
	pthread_mutex_lock(&mu);
	if (dev.open)
		rv = SDR_OPENDEVICE; /* one device per process, as many cards allow */
	else {
		read_config();
		dev.open = 1;
		dev.epoch++;
		*phDeviceHandle = &device_token;
		atomic_fetch_add(&stats[ST_DEVICE_OPENS], 1);
	}
	pthread_mutex_unlock(&mu);
	return rv;
}

EXPORT int SDF_CloseDevice(void *hDeviceHandle) {
	int rv = SDR_OK;
	pthread_mutex_lock(&mu);
	if (hDeviceHandle != &device_token || !dev.open)
		rv = SDR_OPENDEVICE;
	else {
		for (struct session *s = dev.sessions; s != NULL; s = s->next)
			if (atomic_load(&s->busy))
				rv = SDR_STEPERR;
		if (rv == SDR_OK) {
			while (dev.sessions != NULL) {
				struct session *s = dev.sessions;
				dev.sessions = s->next;
				free_keys(s);
				free(s);
				atomic_fetch_sub(&stats[ST_SESSIONS_OPEN], 1);
			}
			dev.open = 0;
			atomic_fetch_add(&stats[ST_DEVICE_CLOSES], 1);
		}
	}
	pthread_mutex_unlock(&mu);
	return rv;
}

EXPORT int SDF_OpenSession(void *hDeviceHandle, void **phSessionHandle) {
	if (phSessionHandle == NULL)
		return SDR_INARGERR;
	if (atomic_load(&down))
		return SDR_COMMFAIL;
	unsigned int fail = atomic_load(&session_fail);
	if (fail != 0)
		return (int)fail;
	struct session *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return SDR_NOBUFFER;
	int rv = SDR_OK;
	pthread_mutex_lock(&mu);
	if (hDeviceHandle != &device_token || !dev.open)
		rv = SDR_OPENDEVICE;
	else if (dev.max_sessions > 0 && atomic_load(&stats[ST_SESSIONS_OPEN]) >= dev.max_sessions)
		rv = SDR_OPENSESSION; /* the licence's limit */
	else {
		s->epoch = dev.epoch;
		s->next = dev.sessions;
		dev.sessions = s;
		*phSessionHandle = s;
		atomic_fetch_add(&stats[ST_SESSIONS_OPENED], 1);
		atomic_fetch_add(&stats[ST_SESSIONS_OPEN], 1);
		stat_max(ST_SESSIONS_OPEN, ST_SESSIONS_OPEN_MAX);
	}
	pthread_mutex_unlock(&mu);
	if (rv != SDR_OK)
		free(s);
	return rv;
}

EXPORT int SDF_CloseSession(void *hSessionHandle) {
	int rv = SDR_OK;
	pthread_mutex_lock(&mu);
	struct session *s = find_session(hSessionHandle);
	if (s == NULL || !dev.open)
		rv = SDR_OPENSESSION;
	else if (atomic_load(&s->busy)) {
		atomic_fetch_add(&stats[ST_BUSY_VIOLATIONS], 1);
		rv = SDR_STEPERR;
	} else {
		for (struct session **p = &dev.sessions; *p != NULL; p = &(*p)->next)
			if (*p == s) {
				*p = s->next;
				break;
			}
		free_keys(s);
		free(s);
		atomic_fetch_sub(&stats[ST_SESSIONS_OPEN], 1);
	}
	pthread_mutex_unlock(&mu);
	return rv;
}

EXPORT int SDF_GetDeviceInfo(void *hSessionHandle, void *pstDeviceInfo) {
	struct session *s;
	int rv = enter(hSessionHandle, &s);
	if (rv != SDR_OK)
		return rv;
	if (pstDeviceInfo == NULL)
		return leave(s, SDR_INARGERR);
	unsigned char *p = pstDeviceInfo;
	memset(p, 0, 100);
	memcpy(p, "gmgate test", 11);         /* IssuerName[40] */
	memcpy(p + 40, "softsdf", 7);         /* DeviceName[16] */
	memcpy(p + 56, "0000000000000001", 16); /* DeviceSerial[16] */
	unsigned int v[7] = {1, 1, SGD_SM2_1 | SGD_SM2_3, 256, 0, SGD_SM3, 1 << 20};
	memcpy(p + 72, v, sizeof(v));
	return leave(s, SDR_OK);
}

EXPORT int SDF_GenerateRandom(void *hSessionHandle, unsigned int uiLength, unsigned char *pucRandom) {
	struct session *s;
	int rv = enter(hSessionHandle, &s);
	if (rv != SDR_OK)
		return rv;
	if (pucRandom == NULL || uiLength == 0 || uiLength > 65536)
		return leave(s, SDR_INARGERR);
	return leave(s, RAND_bytes(pucRandom, (int)uiLength) == 1 ? SDR_OK : SDR_RANDERR);
}

EXPORT int SDF_GetPrivateKeyAccessRight(void *hSessionHandle, unsigned int uiKeyIndex, unsigned char *pucPassword,
		unsigned int uiPwdLength) {
	struct session *s;
	int rv = enter(hSessionHandle, &s);
	if (rv != SDR_OK)
		return rv;
	if (!valid_index(uiKeyIndex))
		return leave(s, SDR_KEYNOTEXIST);
	if (pucPassword == NULL || uiPwdLength < MIN_PIN || uiPwdLength > MAX_PIN ||
			memchr(pucPassword, 0, uiPwdLength) != NULL)
		return leave(s, SDR_INARGERR);
	char pin[MAX_PIN + 1];
	memcpy(pin, pucPassword, uiPwdLength);
	pin[uiPwdLength] = 0;
	char path[PATH_MAX + 32];
	EVP_PKEY *sign = NULL, *enc = NULL;
	key_path(path, sizeof(path), "sign", uiKeyIndex, ".pem");
	int rs = load_private(path, pin, &sign);
	key_path(path, sizeof(path), "enc", uiKeyIndex, ".pem");
	int re = load_private(path, pin, &enc);
	OPENSSL_cleanse(pin, sizeof(pin));
	if (rs == SDR_KEYNOTEXIST && re == SDR_KEYNOTEXIST)
		rv = SDR_KEYNOTEXIST;
	else if (rs != SDR_OK && rs != SDR_KEYNOTEXIST)
		rv = rs;
	else if (re != SDR_OK && re != SDR_KEYNOTEXIST)
		rv = re;
	if (rv != SDR_OK) {
		EVP_PKEY_free(sign);
		EVP_PKEY_free(enc);
		atomic_fetch_add(&stats[ST_ACCESS_DENIED], 1);
		return leave(s, rv);
	}
	EVP_PKEY_free(s->sign[uiKeyIndex]);
	EVP_PKEY_free(s->enc[uiKeyIndex]);
	s->sign[uiKeyIndex] = sign;
	s->enc[uiKeyIndex] = enc;
	atomic_fetch_add(&stats[ST_ACCESS_GRANTED], 1);
	return leave(s, SDR_OK);
}

EXPORT int SDF_ReleasePrivateKeyAccessRight(void *hSessionHandle, unsigned int uiKeyIndex) {
	struct session *s;
	int rv = enter(hSessionHandle, &s);
	if (rv != SDR_OK)
		return rv;
	if (!valid_index(uiKeyIndex))
		return leave(s, SDR_KEYNOTEXIST);
	EVP_PKEY_free(s->sign[uiKeyIndex]);
	EVP_PKEY_free(s->enc[uiKeyIndex]);
	s->sign[uiKeyIndex] = s->enc[uiKeyIndex] = NULL;
	return leave(s, SDR_OK);
}

/* export_public writes ECCrefPublicKey {uint bits; x; y} from kind-N.pub.pem. */
static int export_public(void *hSessionHandle, const char *kind, unsigned int idx, unsigned char *out) {
	struct session *s;
	int rv = enter(hSessionHandle, &s);
	if (rv != SDR_OK)
		return rv;
	if (out == NULL)
		return leave(s, SDR_INARGERR);
	if (!valid_index(idx))
		return leave(s, SDR_KEYNOTEXIST);
	char path[PATH_MAX + 32];
	key_path(path, sizeof(path), kind, idx, ".pub.pem");
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return leave(s, SDR_KEYNOTEXIST);
	EVP_PKEY *k = PEM_read_PUBKEY(f, NULL, NULL, NULL);
	fclose(f);
	ERR_clear_error();
	unsigned char point[65];
	size_t n = 0;
	if (k == NULL || !EVP_PKEY_is_a(k, "SM2") ||
			!EVP_PKEY_get_octet_string_param(k, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof(point), &n) || n != 65 ||
			point[0] != 4) {
		EVP_PKEY_free(k);
		return leave(s, SDR_KEYTYPEERR);
	}
	EVP_PKEY_free(k);
	unsigned int bits = 256;
	memcpy(out, &bits, 4);
	put_field(out + 4, point + 1);
	put_field(out + 4 + dev.coord, point + 33);
	return leave(s, SDR_OK);
}

EXPORT int SDF_ExportSignPublicKey_ECC(void *hSessionHandle, unsigned int uiKeyIndex, void *pucPublicKey) {
	return export_public(hSessionHandle, "sign", uiKeyIndex, pucPublicKey);
}

EXPORT int SDF_ExportEncPublicKey_ECC(void *hSessionHandle, unsigned int uiKeyIndex, void *pucPublicKey) {
	return export_public(hSessionHandle, "enc", uiKeyIndex, pucPublicKey);
}

/* sign_e signs a 32-byte e with OpenSSL (EVP_PKEY_sign on an SM2 key takes
 * its input as e) and returns r and s as 32-byte big-endian values. */
static int sign_e(EVP_PKEY *key, const unsigned char *e, unsigned char r[32], unsigned char sv[32]) {
	unsigned char der[128];
	size_t n = sizeof(der);
	int ok = 0;
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, key, NULL);
	if (ctx != NULL && EVP_PKEY_sign_init(ctx) == 1 && EVP_PKEY_sign(ctx, der, &n, e, 32) == 1) {
		const unsigned char *p = der;
		ECDSA_SIG *sig = d2i_ECDSA_SIG(NULL, &p, (long)n);
		if (sig != NULL) {
			ok = BN_bn2binpad(ECDSA_SIG_get0_r(sig), r, 32) == 32 && BN_bn2binpad(ECDSA_SIG_get0_s(sig), sv, 32) == 32;
			ECDSA_SIG_free(sig);
		}
	}
	EVP_PKEY_CTX_free(ctx);
	ERR_clear_error();
	return ok;
}

#ifndef SOFTSDF_OMIT_SIGN
EXPORT int SDF_InternalSign_ECC(void *hSessionHandle, unsigned int uiISKIndex, unsigned char *pucData,
		unsigned int uiDataLength, void *pucSignature) {
	struct session *s;
	int rv = enter(hSessionHandle, &s);
	if (rv != SDR_OK)
		return rv;
	if (!valid_index(uiISKIndex))
		return leave(s, SDR_KEYNOTEXIST);
	if (pucData == NULL || pucSignature == NULL || uiDataLength != 32)
		return leave(s, SDR_INARGERR);
	if (s->sign[uiISKIndex] == NULL)
		return leave(s, SDR_PARDENY);
	if ((rv = inject()) != SDR_OK)
		return leave(s, rv);
	unsigned char r[32], sv[32];
	if (!sign_e(s->sign[uiISKIndex], pucData, r, sv))
		return leave(s, SDR_SIGNERR);
	unsigned char *out = pucSignature;
	put_field(out, r);
	put_field(out + dev.coord, sv);
	atomic_fetch_add(&stats[ST_SIGNS], 1);
	return leave(s, SDR_OK);
}
#endif

/* der_header writes a DER tag and length. */
static size_t der_header(unsigned char *p, unsigned char tag, size_t len) {
	p[0] = tag;
	if (len < 128) {
		p[1] = (unsigned char)len;
		return 2;
	}
	if (len < 256) {
		p[1] = 0x81;
		p[2] = (unsigned char)len;
		return 3;
	}
	p[1] = 0x82;
	p[2] = (unsigned char)(len >> 8);
	p[3] = (unsigned char)len;
	return 4;
}

/* der_uint writes a non-negative INTEGER from 32 big-endian bytes. */
static size_t der_uint(unsigned char *p, const unsigned char *v) {
	int i = 0;
	while (i < 31 && v[i] == 0)
		i++;
	size_t len = 32 - i + (v[i] & 0x80 ? 1 : 0);
	size_t h = der_header(p, 0x02, len);
	if (v[i] & 0x80)
		p[h++] = 0;
	memcpy(p + h, v + i, 32 - i);
	return h + 32 - i;
}

/* cipher_to_der turns the ECCCipher of the profile's layout into the GM/T
 * 0009 SEQUENCE{INTEGER x, INTEGER y, OCTET STRING hash, OCTET STRING c2}
 * that OpenSSL decrypts. */
static int cipher_to_der(const unsigned char *in, unsigned char *der, size_t *derlen, unsigned int *clen) {
	unsigned char x[32], y[32];
	const unsigned char *hash, *c2;
	unsigned int L;
	int n = dev.coord;
	if (dev.cipher2008) { /* {uint clength; x; y; C[136]; M[32]} */
		memcpy(&L, in, 4);
		if (!get_field(in + 4, x) || !get_field(in + 4 + n, y))
			return SDR_INARGERR;
		c2 = in + 4 + 2 * n;
		hash = in + 4 + 2 * n + C2_2008;
		if (L == 0 || L > C2_2008)
			return SDR_ENCDATAERR;
	} else { /* {x; y; M[32]; uint L; C[L]} */
		if (!get_field(in, x) || !get_field(in + n, y))
			return SDR_INARGERR;
		hash = in + 2 * n;
		memcpy(&L, in + 2 * n + 32, 4);
		c2 = in + 2 * n + 36;
		if (L == 0 || L > MAX_C2)
			return SDR_ENCDATAERR;
	}
	unsigned char body[512];
	size_t b = der_uint(body, x);
	b += der_uint(body + b, y);
	b += der_header(body + b, 0x04, 32);
	memcpy(body + b, hash, 32);
	b += 32;
	b += der_header(body + b, 0x04, L);
	memcpy(body + b, c2, L);
	b += L;
	size_t h = der_header(der, 0x30, b);
	memcpy(der + h, body, b);
	*derlen = h + b;
	*clen = L;
	return SDR_OK;
}

static int decrypt_common(void *hSessionHandle, unsigned int idx, int check_alg, unsigned int alg, const void *cipher,
		unsigned char *out, unsigned int *outlen) {
	struct session *s;
	int rv = enter(hSessionHandle, &s);
	if (rv != SDR_OK)
		return rv;
	if (!valid_index(idx))
		return leave(s, SDR_KEYNOTEXIST);
	if (cipher == NULL || outlen == NULL)
		return leave(s, SDR_INARGERR);
	if (check_alg && alg != dev.alg_sm2_3)
		return leave(s, SDR_ALGNOTSUPPORT);
	if (s->enc[idx] == NULL)
		return leave(s, SDR_PARDENY);
	unsigned char der[600];
	size_t derlen;
	unsigned int L;
	if ((rv = cipher_to_der(cipher, der, &derlen, &L)) != SDR_OK)
		return leave(s, rv);
	if (out == NULL) {
		*outlen = L;
		return leave(s, SDR_OK);
	}
	if (*outlen < L)
		return leave(s, SDR_NOBUFFER);
	if ((rv = inject()) != SDR_OK)
		return leave(s, rv);
	unsigned char pt[MAX_C2 + 64];
	size_t ptlen = sizeof(pt);
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, s->enc[idx], NULL);
	int ok = ctx != NULL && EVP_PKEY_decrypt_init(ctx) == 1 && EVP_PKEY_decrypt(ctx, pt, &ptlen, der, derlen) == 1;
	EVP_PKEY_CTX_free(ctx);
	ERR_clear_error();
	if (!ok || ptlen != L) {
		OPENSSL_cleanse(pt, sizeof(pt));
		return leave(s, SDR_ENCDATAERR);
	}
	memcpy(out, pt, L);
	OPENSSL_cleanse(pt, sizeof(pt));
	*outlen = L;
	atomic_fetch_add(&stats[ST_DECRYPTS], 1);
	return leave(s, SDR_OK);
}

#if SOFTSDF_DECRYPT_VARIANT == 1
EXPORT int SDF_InternalDecrypt_ECC(void *hSessionHandle, unsigned int uiISKIndex, unsigned int uiAlgID,
		void *pucEncData, unsigned char *pucData, unsigned int *puiDataLength) {
	return decrypt_common(hSessionHandle, uiISKIndex, 1, uiAlgID, pucEncData, pucData, puiDataLength);
}
#elif SOFTSDF_DECRYPT_VARIANT == 2
EXPORT int SDF_InternalDecrypt_ECC(void *hSessionHandle, unsigned int uiISKIndex, void *pucEncData,
		unsigned char *pucData, unsigned int *puiDataLength) {
	return decrypt_common(hSessionHandle, uiISKIndex, 0, 0, pucEncData, pucData, puiDataLength);
}
#elif SOFTSDF_DECRYPT_VARIANT == 3
EXPORT int SDF_InternalDecrypt_ECC(void *hSessionHandle, unsigned int uiAlgID, unsigned int uiISKIndex,
		void *pucEncData, unsigned char *pucData, unsigned int *puiDataLength) {
	return decrypt_common(hSessionHandle, uiISKIndex, 1, uiAlgID, pucEncData, pucData, puiDataLength);
}
#elif SOFTSDF_DECRYPT_VARIANT == 4
EXPORT int SDF_InternalDecrypt_ECC(void *hSessionHandle, unsigned int uiISKIndex, unsigned int uiAlgID,
		unsigned char *pucData, unsigned int *puiDataLength, void *pucEncData) {
	return decrypt_common(hSessionHandle, uiISKIndex, 1, uiAlgID, pucEncData, pucData, puiDataLength);
}
#endif

/* SOFTSDF_Control changes faults and latency at run time; -1 for an unknown
 * name. */
EXPORT int SOFTSDF_Control(const char *name, long value) {
	if (strcmp(name, "latency_us") == 0)
		atomic_store(&latency_us, (unsigned int)value);
	else if (strcmp(name, "fail_every") == 0)
		atomic_store(&fail_every, (unsigned int)value);
	else if (strcmp(name, "fail_code") == 0)
		atomic_store(&fail_code, (unsigned int)value);
	else if (strcmp(name, "fail_next") == 0)
		atomic_store(&fail_next, (unsigned int)value);
	else if (strcmp(name, "down") == 0)
		atomic_store(&down, value != 0);
	else if (strcmp(name, "session_fail") == 0)
		atomic_store(&session_fail, (unsigned int)value);
	else if (strcmp(name, "hang") == 0) {
		pthread_mutex_lock(&hang_mu);
		hang_on = value != 0;
		pthread_cond_broadcast(&hang_cv);
		pthread_mutex_unlock(&hang_mu);
	} else if (strcmp(name, "reset") == 0) {
		pthread_mutex_lock(&mu);
		dev.epoch++;
		pthread_mutex_unlock(&mu);
	} else
		return -1;
	return 0;
}

/* SOFTSDF_Stats copies up to n counters (enum stat order); returns how many
 * there are. */
EXPORT int SOFTSDF_Stats(unsigned long long *out, int n) {
	for (int i = 0; i < n && i < ST_COUNT; i++)
		out[i] = atomic_load(&stats[i]);
	return ST_COUNT;
}

/* SOFTSDF_BenchDirect runs iterations of OpenSSL's SM2 sign (op 0, on a
 * fixed 32-byte e) or decrypt (op 1, of a 48-byte message) with the key in
 * keyfile, without any SDF bookkeeping: the baseline the SDF path is
 * measured against. Returns 0 on success. */
EXPORT int SOFTSDF_BenchDirect(int op, const char *keyfile, const char *pin, long iterations) {
	EVP_PKEY *key = NULL;
	if (load_private(keyfile, pin, &key) != SDR_OK)
		return -1;
	int rv = 0;
	unsigned char e[32], r[32], sv[32], msg[48], ct[256], pt[256];
	size_t ctlen = sizeof(ct);
	memset(e, 0x5a, sizeof(e));
	memset(msg, 0xa5, sizeof(msg));
	if (op == 1) {
		EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, key, NULL);
		if (ctx == NULL || EVP_PKEY_encrypt_init(ctx) != 1 || EVP_PKEY_encrypt(ctx, ct, &ctlen, msg, sizeof(msg)) != 1)
			rv = -1;
		EVP_PKEY_CTX_free(ctx);
	}
	for (long i = 0; rv == 0 && i < iterations; i++) {
		if (op == 0) {
			if (!sign_e(key, e, r, sv))
				rv = -1;
			continue;
		}
		size_t ptlen = sizeof(pt);
		EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, key, NULL);
		if (ctx == NULL || EVP_PKEY_decrypt_init(ctx) != 1 || EVP_PKEY_decrypt(ctx, pt, &ptlen, ct, ctlen) != 1 ||
				ptlen != sizeof(msg))
			rv = -1;
		EVP_PKEY_CTX_free(ctx);
	}
	EVP_PKEY_free(key);
	return rv;
}
