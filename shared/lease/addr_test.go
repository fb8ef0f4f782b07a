package lease

import (
	"errors"
	"net"
	"testing"
)

func TestAdvertiseAddr(t *testing.T) {
	if got, err := AdvertiseAddr("10.1.2.3:4780", ":9999"); err != nil || got != "10.1.2.3:4780" {
		t.Fatalf("given: %q, %v", got, err)
	}
	if _, err := AdvertiseAddr("no-port", ":4780"); !errors.Is(err, ErrConfig) {
		t.Fatalf("given without a port: %v, want ErrConfig", err)
	}
	if _, err := AdvertiseAddr("", "no-port"); !errors.Is(err, ErrConfig) {
		t.Fatalf("listen address without a port: %v, want ErrConfig", err)
	}
	got, err := AdvertiseAddr("", ":4780")
	if err != nil {
		t.Skipf("this host has no non-loopback IPv4 address: %v", err)
	}
	host, port, _ := net.SplitHostPort(got)
	if ip := net.ParseIP(host); port != "4780" || ip == nil || ip.IsLoopback() || ip.To4() == nil {
		t.Fatalf("derived %q, want a non-loopback IPv4 address and port 4780", got)
	}
}
