// Package sdf holds SM2 private keys on crypto cards and hardware security
// modules through the vendor's SDF library (GM/T 0018), loaded with dlopen
// at run time: gmgate has no link-time dependency on any vendor.
//
// A key is named by a reference (package accel passes sdf: references
// here):
//
//	sdf:/opt/vendor/libsdf.so?index=1&key=sign&pin-env=SDF_PIN&sessions=16&profile=standard&timeout=2s
//
//	index=N        key index on the device, from 1 (required)
//	key=sign|enc   the signing or the encryption pair at that index (required)
//	pin-env=VAR    the private-key access PIN, from an environment variable
//	pin-file=PATH  the PIN, from a file (one line); never written inline
//	sessions=N     sessions opened on the library, shared by every key on it (default 4)
//	timeout=D      limit for one operation, waiting for a session included (default 2s)
//	profile=NAME   vendor profile: standard, tongsuo, legacy, sansec2008 (default standard)
//	decrypt=v1|v2|v3|v4|none, alg-ids=2012|legacy, coord=64|32, cipher=std|2008
//	               override one field of the profile
//	lock-thread=true|false  keep each session on one OS thread, for libraries
//	               that bind sessions to threads (default false: it costs a
//	               thread wake-up per operation)
//
// Without a PIN the backend never calls SDF_GetPrivateKeyAccessRight (for
// devices that log in by other means). A PIN the device refuses is not
// offered again, by any session or by a key opened again with the same
// PIN, since cards lock a key after a few failures; a key opened with
// another PIN for the index replaces it.
//
// The device is opened once per library per process and its sessions are
// shared by every key on it, so sessions= is what the card's licence
// counts; every reference to one library must agree on sessions=,
// lock-thread= and the profile. Each session belongs to one worker
// goroutine, which makes every call on it: a session never serves two
// calls at once. A call that finds no free session within the timeout
// fails with ErrPoolExhausted; one the library does not answer in time
// fails with ErrTimeout (its session stays busy until the library
// returns). The device and its sessions are closed with the last key on
// them: Close waits for that up to the key's timeout, and when a call in
// progress has not returned by then (a hung card or link) the device
// closes in the background once it does, and Close returns an error that
// says so. A call that does not return holds up no other library. An Open
// of a library whose previous device is still closing waits for it within
// its timeout, then fails saying that a call on the previous device has
// not returned, rather than open the device a second time beside it. A
// session whose link fails (SDR_COMMFAIL, SDR_HARDFAIL,
// SDR_OPENSESSION) is replaced and the call tried once more on the new
// one; when sessions cannot be opened any more the device handle is
// closed and reopened, at most every 200ms while it keeps failing. A
// session that obtains the access right to an index checks that the
// device still exports there the public keys checked when the keys
// opened; if not, the call fails and says so.
//
// Signing computes e = SM3(Z || M) on the host, with the user ID of the
// sm2.SM2SignerOption (the default 1234567812345678 for TLCP) and the
// signing public key, and has the card sign e with SDF_InternalSign_ECC;
// the raw r||s becomes DER. Decryption uses the vendor extension
// SDF_InternalDecrypt_ECC, whose prototype, algorithm IDs, coordinate
// width and ECCCipher layout differ between vendors and are fixed by the
// profile, since none of them can be detected. SM2 key agreement (the
// ECDHE suites) is not offered: cards return it as a key handle, not the
// bytes TLCP needs, so an encryption key for ECDHE stays in software.
//
// Open tests every key before returning it: the public key must be a valid
// SM2 point in the profile's layout, a test signature must verify with
// gmsm, and a message gmsm encrypted to the key must decrypt to the same
// bytes; the error says which step failed and which setting to check.
// accel.SelfTest adds the check against the certificate.
//
// Built with CGO_ENABLED=0, Open fails with ErrNoCgo.
package sdf
