package sdf

import (
	"errors"
	"fmt"
)

// Return codes of GM/T 0018 Appendix A.
const (
	sdrOK               = 0
	sdrBase             = 0x01000000
	sdrUnknownErr       = sdrBase + 0x01
	sdrNotSupport       = sdrBase + 0x02
	sdrCommFail         = sdrBase + 0x03
	sdrHardFail         = sdrBase + 0x04
	sdrOpenDevice       = sdrBase + 0x05
	sdrOpenSession      = sdrBase + 0x06
	sdrParDeny          = sdrBase + 0x07
	sdrKeyNotExist      = sdrBase + 0x08
	sdrAlgNotSupport    = sdrBase + 0x09
	sdrAlgModNotSupport = sdrBase + 0x0A
	sdrInArgErr         = sdrBase + 0x1D
	sdrPrkRErr          = sdrBase + 0x18
)

var sdrNames = map[uint32]struct{ name, meaning string }{
	sdrBase + 0x01: {"SDR_UNKNOWERR", "unknown error"},
	sdrBase + 0x02: {"SDR_NOTSUPPORT", "function not supported"},
	sdrBase + 0x03: {"SDR_COMMFAIL", "communication with the device failed"},
	sdrBase + 0x04: {"SDR_HARDFAIL", "the hardware does not respond"},
	sdrBase + 0x05: {"SDR_OPENDEVICE", "opening the device failed"},
	sdrBase + 0x06: {"SDR_OPENSESSION", "opening the session failed or the session is gone"},
	sdrBase + 0x07: {"SDR_PARDENY", "no permission to use the private key"},
	sdrBase + 0x08: {"SDR_KEYNOTEXIST", "the key does not exist"},
	sdrBase + 0x09: {"SDR_ALGNOTSUPPORT", "algorithm not supported"},
	sdrBase + 0x0A: {"SDR_ALGMODNOTSUPPORT", "algorithm mode not supported"},
	sdrBase + 0x0B: {"SDR_PKOPERR", "public-key operation failed"},
	sdrBase + 0x0C: {"SDR_SKOPERR", "private-key operation failed"},
	sdrBase + 0x0D: {"SDR_SIGNERR", "signing failed"},
	sdrBase + 0x0E: {"SDR_VERIFYERR", "verification failed"},
	sdrBase + 0x0F: {"SDR_SYMOPERR", "symmetric operation failed"},
	sdrBase + 0x10: {"SDR_STEPERR", "calls made in the wrong order or concurrently on one session"},
	sdrBase + 0x11: {"SDR_FILESIZEERR", "input length error"},
	sdrBase + 0x12: {"SDR_FILENOEXIST", "file does not exist"},
	sdrBase + 0x13: {"SDR_FILEOFSERR", "file offset error"},
	sdrBase + 0x14: {"SDR_KEYTYPEERR", "key type error"},
	sdrBase + 0x15: {"SDR_KEYERR", "key error"},
	sdrBase + 0x16: {"SDR_ENCDATAERR", "ECC ciphertext error"},
	sdrBase + 0x17: {"SDR_RANDERR", "random number generation failed"},
	sdrBase + 0x18: {"SDR_PRKRERR", "obtaining the private-key access right failed"},
	sdrBase + 0x19: {"SDR_MACERR", "MAC failed"},
	sdrBase + 0x1A: {"SDR_FILEEXISTS", "file exists"},
	sdrBase + 0x1B: {"SDR_FILEWERR", "file write failed"},
	sdrBase + 0x1C: {"SDR_NOBUFFER", "buffer too small"},
	sdrBase + 0x1D: {"SDR_INARGERR", "input argument error"},
	sdrBase + 0x1E: {"SDR_OUTARGERR", "output argument error"},
	sdrBase + 0x1F: {"SDR_USERIDERR", "user ID error"},
}

// CodeName returns the GM/T 0018 name and hexadecimal value of a return
// code, for example "SDR_COMMFAIL (0x01000003)".
func CodeName(code uint32) string {
	if n, ok := sdrNames[code]; ok {
		return fmt.Sprintf("%s (0x%08X)", n.name, code)
	}
	return fmt.Sprintf("vendor code 0x%08X", code)
}

// Error is a non-zero return code from a function of the SDF library.
type Error struct {
	// Func is the SDF function, such as "SDF_InternalSign_ECC".
	Func string
	// Code is its return code.
	Code uint32
}

func (e *Error) Error() string {
	s := e.Func + " returned " + CodeName(e.Code)
	if n, ok := sdrNames[e.Code]; ok {
		s += ": " + n.meaning
	}
	return s
}

// sessionFatal reports whether the session that returned the error must
// be dropped: the device or the link to it failed, or the session is gone.
func (e *Error) sessionFatal() bool {
	switch e.Code {
	case sdrCommFail, sdrHardFail, sdrOpenSession, sdrOpenDevice:
		return true
	}
	return false
}

// deviceFatal reports whether the device handle itself must be reopened.
func (e *Error) deviceFatal() bool {
	switch e.Code {
	case sdrCommFail, sdrHardFail, sdrOpenDevice:
		return true
	}
	return false
}

// unauthorised reports whether the session lost (or never had) the
// private-key access right.
func (e *Error) unauthorised() bool {
	return e.Code == sdrParDeny || e.Code == sdrPrkRErr
}

// profileMismatch reports codes that usually mean the vendor profile
// (algorithm IDs, prototype variant, layouts) does not fit the library.
func (e *Error) profileMismatch() bool {
	switch e.Code {
	case sdrNotSupport, sdrAlgNotSupport, sdrAlgModNotSupport, sdrInArgErr:
		return true
	}
	return false
}

var (
	// ErrPoolExhausted is returned (wrapped) when no session became free
	// within the operation timeout.
	ErrPoolExhausted = errors.New("sdf: no free session")
	// ErrTimeout is returned (wrapped) when the library did not answer
	// within the operation timeout.
	ErrTimeout = errors.New("sdf: operation timed out")
	// ErrClosed is returned (wrapped) by operations on a closed key.
	ErrClosed = errors.New("sdf: key closed")
	// ErrNoCgo is returned (wrapped) by Open in a binary built without cgo.
	ErrNoCgo = errors.New("sdf: built without cgo")
	// ErrDecryption is returned for any failed decryption of a
	// ciphertext, whatever the cause, so that callers learn nothing about
	// the plaintext.
	ErrDecryption = errors.New("sdf: decryption failed")
)

// DeviceError reports whether err comes from the SDF library or the
// device, rather than from its input.
func DeviceError(err error) bool {
	var e *Error
	return errors.As(err, &e)
}
