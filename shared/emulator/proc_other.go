//go:build !unix

package emulator

import (
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

func terminate(p *os.Process) { p.Kill() }
func kill(p *os.Process)      { p.Kill() }
