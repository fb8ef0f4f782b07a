//go:build !linux

package server

import "net"

// setNotSentLowat does nothing off Linux: a blocked write wakes when the
// system's buffer rules say, and a slow reader may be cut off sooner.
func setNotSentLowat(*net.TCPConn, int) {}
