package emulator

import (
	"os"
	"syscall"
)

// sysProcAttr puts the server in its own process group (so Stop reaches any
// children) and has the kernel kill it if the test binary dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func terminate(p *os.Process) { syscall.Kill(-p.Pid, syscall.SIGTERM) }
func kill(p *os.Process)      { syscall.Kill(-p.Pid, syscall.SIGKILL) }
