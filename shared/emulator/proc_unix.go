//go:build unix && !linux

package emulator

import (
	"os"
	"syscall"
)

// sysProcAttr puts the server in its own process group so Stop reaches any
// children.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func terminate(p *os.Process) { syscall.Kill(-p.Pid, syscall.SIGTERM) }
func kill(p *os.Process)      { syscall.Kill(-p.Pid, syscall.SIGKILL) }
