package main

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// deathSignal asks the kernel for SIGTERM when the parent dies. A parent
// that died before the call is caught by exitWithParent's poll.
func deathSignal() { _ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0, 0, 0) }

// parentExe is the parent process's executable ("" when unknown).
func parentExe() string {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", os.Getppid()))
	if err != nil {
		return ""
	}
	return exe
}
