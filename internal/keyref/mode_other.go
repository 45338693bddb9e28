//go:build !unix

package keyref

import "io/fs"

// fileModes: Windows reports no owner or group classes in a mode.
const fileModes = false

func fileGroup(fs.FileInfo) (int, bool) { return 0, false }
