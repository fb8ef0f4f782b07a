package server

import (
	"net"

	"golang.org/x/sys/unix"
)

// setNotSentLowat sets TCP_NOTSENT_LOWAT on c's socket: a write blocks
// while n bytes or more wait unsent, and wakes once fewer do. Without it,
// Linux wakes a blocked writer only once a third of its send buffer
// (autotuned up to tcp_wmem's 4 MiB) is free again, so a reader taking
// 300 KiB/s left a write blocked over 3 s: the write bound
// (writebound.go) would cut off a reader that keeps taking bytes. What is
// in flight is bounded by the receiver's window as before.
func setNotSentLowat(c *net.TCPConn, n int) {
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, n) })
}
