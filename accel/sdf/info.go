package sdf

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
)

// DeviceInfo is what SDF_GetDeviceInfo says about the device.
type DeviceInfo struct {
	Issuer, Device, Serial string
	DeviceVersion          uint32
	// StandardVersion is the GM/T 0018 version the device follows.
	StandardVersion uint32
}

// deviceInfoLen is the size of DEVICEINFO (the same in every version);
// the buffer handed over is larger in case a vendor's is.
const (
	deviceInfoLen    = 100
	deviceInfoBufLen = 512
)

// DeviceInfo asks the device to describe itself, for diagnostics.
func (k *Key) DeviceInfo(ctx context.Context) (DeviceInfo, error) {
	if !k.d.lib.has(fnGetDeviceInfo) {
		return DeviceInfo{}, errors.New("the library has no SDF_GetDeviceInfo")
	}
	ctx, cancel := context.WithTimeout(ctx, k.cfg.Timeout)
	defer cancel()
	buf := make([]byte, deviceInfoBufLen)
	if err := k.d.do(ctx, k.cfg.Index, func(l library, s uintptr) error { return l.deviceInfo(s, buf) }); err != nil {
		return DeviceInfo{}, err
	}
	text := func(b []byte) string { return string(bytes.TrimRight(b, "\x00 ")) }
	return DeviceInfo{
		Issuer:          text(buf[0:40]),
		Device:          text(buf[40:56]),
		Serial:          text(buf[56:72]),
		DeviceVersion:   binary.NativeEndian.Uint32(buf[72:]),
		StandardVersion: binary.NativeEndian.Uint32(buf[76:]),
	}, nil
}
