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

// underGoRun reports whether this process looks like `go run`'s.
func underGoRun() bool {
	exe, _ := os.Executable()
	return goRunChild(exe, parentExe(), os.Getenv("GOCACHE"))
}

// goRunChild decides underGoRun from this executable's path, the parent's
// executable ("" where unknown) and $GOCACHE: the parent is the go
// command (go, or a go1.N.M toolchain), or the executable is in a go-build
// directory (the default build cache, or the temporary build directory)
// or in $GOCACHE, where go run caches what it builds since Go 1.24.
// Issue 34: only the "go-build" path was checked, so under another
// GOCACHE killing go run left strand dev serving.
func goRunChild(exe, parent, gocache string) bool {
	if b := filepath.Base(parent); parent != "" && (b == "go" || b == "go.exe" || strings.HasPrefix(b, "go1.")) {
		return true
	}
	if exe == "" {
		return false
	}
	if strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return true
	}
	return gocache != "" && strings.HasPrefix(exe, filepath.Clean(gocache)+string(filepath.Separator))
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
