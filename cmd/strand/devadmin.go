package main

// devAdminAddr is strand dev's admin address (/metrics, /healthz) when
// --admin-addr is not given: on by default so that a first scrape needs no
// flag, on loopback so that it shows nothing beyond the machine, and next
// to the API's default port (4780) rather than on Prometheus' own 9090
// (ADR 0056).
const devAdminAddr = "127.0.0.1:4781"

// devAdminFallback is where the admin listener goes when addr cannot be
// bound at start (node.Config.AdminFallback): a free loopback port for the
// default address, so that a second strand dev on one machine still starts
// and prints where its metrics are; none when --admin-addr was given (then
// it must bind, and the listen error says why). Decided at bind time: a
// probe before it let two processes starting at once both find the
// default free.
func devAdminFallback(addr string, given bool) string {
	if given || addr == "" {
		return ""
	}
	return "127.0.0.1:0"
}
