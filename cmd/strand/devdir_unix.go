//go:build unix

package main

import (
	"io/fs"
	"os"
	"syscall"
)

// ownedByOther reports the owner of fi and whether it is another user.
func ownedByOther(fi fs.FileInfo) (uid int, other bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), int(st.Uid) != os.Geteuid()
}
