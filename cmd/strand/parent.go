package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// `go run ./cmd/strand dev` runs the binary as a child of the go command;
// killing the go command alone (kill PID, an IDE's stop button) used to
// leave strand dev serving and holding its data dir. Under go run, strand
// dev therefore exits with its parent: on Linux the kernel sends it
// SIGTERM when the parent dies (prctl PR_SET_PDEATHSIG), and on every
// system a poll of the parent pid every second does the same. SIGTERM is
// handled like Ctrl-C: an orderly shutdown.

// underGoRun reports whether this process looks like `go run`'s: its
// executable is in go's temporary build directory.
func underGoRun() bool {
	exe, err := os.Executable()
	return err == nil && strings.Contains(exe, string(filepath.Separator)+"go-build")
}

// exitWithParent arranges for SIGTERM to this process once its parent
// dies.
func exitWithParent() {
	ppid := os.Getppid()
	deathSignal() // Linux: prompt
	go func() {
		for {
			if os.Getppid() != ppid {
				_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
				return
			}
			time.Sleep(time.Second)
		}
	}()
}
