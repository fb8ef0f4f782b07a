package main

import "net"

// devAdminAddr is strand dev's admin address (/metrics, /healthz) when
// --admin-addr is not given: on by default so that a first scrape needs no
// flag, on loopback so that it shows nothing beyond the machine, and next
// to the API's default port (4780) rather than on Prometheus' own 9090
// (ADR 0056).
const devAdminAddr = "127.0.0.1:4781"

// devAdmin is the admin address strand dev listens on: addr when given
// (--admin-addr, "" turning it off), else addr when free, else a free
// loopback port, so that a second strand dev on one machine still starts
// (it prints where its metrics are).
func devAdmin(addr string, given bool) string {
	if given || addr == "" {
		return addr
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "127.0.0.1:0"
	}
	_ = ln.Close()
	return addr
}

// devAdminFallback is where the admin listener goes when addr cannot be
// bound at start: a free loopback port for the default address (devAdmin
// checked it free, but another process may take it before the node
// binds it), none when --admin-addr was given.
func devAdminFallback(addr string, given bool) string {
	if given || addr == "" {
		return ""
	}
	return "127.0.0.1:0"
}
