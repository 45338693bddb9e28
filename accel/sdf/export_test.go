package sdf

import "context"

// RoundTrip sends one request through the key's session pool: with
// callLibrary it calls SDF_GetDeviceInfo (cgo and the library's own
// bookkeeping, no cryptography), otherwise nothing (the hand-off alone).
func RoundTrip(k *Key, callLibrary bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), k.cfg.Timeout)
	defer cancel()
	buf := make([]byte, deviceInfoBufLen)
	return k.d.do(ctx, k.cfg.Index, func(l library, s uintptr) error {
		if !callLibrary {
			return nil
		}
		return l.deviceInfo(s, buf)
	})
}
