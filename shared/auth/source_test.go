package auth

import "testing"

// TestSourceIPv6Block (review 4): the per-source limits key an IPv6
// address by its /64, the block one host is given, so a host cannot be as
// many sources as it has addresses. Before, 2001:db8::1 and 2001:db8::2
// were two sources. IPv4 (and IPv4 in IPv6) stay whole addresses.
func TestSourceIPv6Block(t *testing.T) {
	same := []string{"[2001:db8:0:1::1]:9092", "[2001:db8:0:1:ffff:ffff:ffff:ffff]:4780", "2001:db8:0:1::5", "[2001:db8:0:1::7%eth0]:1"}
	for _, a := range same[1:] {
		if Source(a) != Source(same[0]) {
			t.Fatalf("Source(%q) = %q, Source(%q) = %q: one /64, want one source", a, Source(a), same[0], Source(same[0]))
		}
	}
	if Source("[2001:db8:0:2::1]:1") == Source(same[0]) {
		t.Fatal("two /64 blocks are one source")
	}
	for addr, want := range map[string]string{
		"10.0.0.1:9092":          "10.0.0.1",
		"10.0.0.2":               "10.0.0.2",
		"[::ffff:10.0.0.3]:9092": "::ffff:10.0.0.3",
		"pipe":                   "pipe",
	} {
		if got := Source(addr); got != want {
			t.Fatalf("Source(%q) = %q, want %q", addr, got, want)
		}
	}
	if Source("10.0.0.1:1") == Source("10.0.0.2:1") {
		t.Fatal("two IPv4 addresses are one source")
	}
}
