//go:build unix

package keyref

import (
	"io/fs"
	"syscall"
)

// fileModes says that the platform's file modes mean what LooseMode
// reads in them.
const fileModes = true

func fileGroup(st fs.FileInfo) (int, bool) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(s.Gid), true
}
