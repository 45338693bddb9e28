package keyref

import (
	"fmt"
	"io/fs"
	"os"
)

// LooseMode reports a secret file (a private key, a password or PIN file,
// a file of sealing keys) that users other than gmgate's may read or
// write, as ssh reports a private key with a loose mode: what is wrong
// (who may read it, and the mode) and the fix. shown is how messages name
// the file: its path, or words such as "the password-file of sign_key"
// where the path sits in a reference's query, which is never shown. A file its group may read
// is fine when that group is one gmgate runs with (the systemd unit's
// gmgate group, Debian's ssl-cert); a file that cannot be examined, and
// a platform without file modes, give "". Existing setups keep working:
// this is a warning, never a refusal.
func LooseMode(path, shown string) (problem, fix string) {
	if !fileModes {
		return "", ""
	}
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() {
		return "", ""
	}
	perm := st.Mode().Perm()
	var who string
	var bits fs.FileMode
	switch {
	case perm&0o007 != 0:
		who, bits = "every user of the machine", perm&0o007
	case perm&0o070 != 0 && !ownGroup(st):
		who, bits = "the members of its group", perm>>3&0o007
	default:
		return "", ""
	}
	access := "accessible"
	switch {
	case bits&0o4 != 0 && bits&0o2 != 0:
		access = "readable and writable"
	case bits&0o4 != 0:
		access = "readable"
	case bits&0o2 != 0:
		access = "writable"
	}
	problem = fmt.Sprintf("%s is %s by %s (mode %04o); a secret should be readable by the user gmgate runs as alone", shown, access, who, uint32(perm))
	if shown != path {
		return problem, "chmod 600 that file (or chmod 640 with the group gmgate runs as: chgrp gmgate)"
	}
	return problem, fmt.Sprintf("chmod 600 %s (or chmod 640 with the group gmgate runs as: chgrp gmgate %s)", path, path)
}

// ownGroup reports whether the group of the file is one the process runs
// with.
func ownGroup(st fs.FileInfo) bool {
	gid, ok := fileGroup(st)
	if !ok {
		return false
	}
	if gid == os.Getegid() {
		return true
	}
	groups, err := os.Getgroups()
	if err != nil {
		return false
	}
	for _, g := range groups {
		if g == gid {
			return true
		}
	}
	return false
}
