package sdf

// Indexes of the library functions the backend resolves.
const (
	fnOpenDevice = iota
	fnCloseDevice
	fnOpenSession
	fnCloseSession
	fnGetPrivateKeyAccessRight
	fnReleasePrivateKeyAccessRight
	fnExportSignPublicKey
	fnExportEncPublicKey
	fnInternalSign
	fnInternalDecrypt
	fnGetDeviceInfo
	fnCount
)

// functions names the library functions by index, and says which ones a
// library must have: without them no key can be used at all.
var functions = [fnCount]struct {
	name     string
	required bool
}{
	fnOpenDevice:                   {"SDF_OpenDevice", true},
	fnCloseDevice:                  {"SDF_CloseDevice", true},
	fnOpenSession:                  {"SDF_OpenSession", true},
	fnCloseSession:                 {"SDF_CloseSession", true},
	fnGetPrivateKeyAccessRight:     {"SDF_GetPrivateKeyAccessRight", true},
	fnReleasePrivateKeyAccessRight: {"SDF_ReleasePrivateKeyAccessRight", true},
	fnExportSignPublicKey:          {"SDF_ExportSignPublicKey_ECC", true},
	fnExportEncPublicKey:           {"SDF_ExportEncPublicKey_ECC", true},
	fnInternalSign:                 {"SDF_InternalSign_ECC", true},
	fnInternalDecrypt:              {"SDF_InternalDecrypt_ECC", false},
	fnGetDeviceInfo:                {"SDF_GetDeviceInfo", false},
}

// library is an SDF library as the device code uses it. Handles are kept
// as integers: vendors may use small numbers rather than addresses, which
// must never look like Go pointers.
type library interface {
	path() string
	has(fn int) bool
	openDevice() (uintptr, error)
	closeDevice(dev uintptr) error
	openSession(dev uintptr) (uintptr, error)
	closeSession(sess uintptr) error
	getAccessRight(sess uintptr, index uint32, pin []byte) error
	releaseAccessRight(sess uintptr, index uint32) error
	// exportPublicKey writes an ECCrefPublicKey into out.
	exportPublicKey(sess uintptr, u Usage, index uint32, out []byte) error
	// internalSign signs the 32-byte e and writes an ECCSignature into out.
	internalSign(sess uintptr, index uint32, e, out []byte) error
	// internalDecrypt decrypts an ECCCipher into out and returns the
	// plaintext length.
	internalDecrypt(sess uintptr, v DecryptVariant, alg, index uint32, cipher, out []byte) (int, error)
	// deviceInfo writes a DEVICEINFO structure into out.
	deviceInfo(sess uintptr, out []byte) error
}
