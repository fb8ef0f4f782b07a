package lease

import (
	"fmt"
	"net"
	"time"
)

// DefaultTTL is the lease's default TTL (--lease-ttl): a crash is
// detected within it, and the leader renews every DefaultTTL/4 (a
// DynamoDB write each), a standby reads every DefaultTTL/10 (a strongly
// consistent read each). ADR 0051 derives the takeover pause from it.
const DefaultTTL = 3 * time.Second

// AdvertiseAddr is where other tasks reach this task's API: adv when it
// is given, else the first IPv4 address of the host that is neither
// loopback nor link-local (a Fargate task's ENI address in awsvpc mode;
// the task metadata interface is link-local) with listen's port.
func AdvertiseAddr(adv, listen string) (string, error) {
	if adv != "" {
		if _, _, err := net.SplitHostPort(adv); err != nil {
			return "", fmt.Errorf("%w: advertise address %q: %v", ErrConfig, adv, err)
		}
		return adv, nil
	}
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("%w: listen address %q: %v", ErrConfig, listen, err)
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("%w: no advertise address given and the host's addresses: %v", ErrConfig, err)
	}
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && !ip.IP.IsLoopback() && !ip.IP.IsLinkLocalUnicast() && ip.IP.To4() != nil {
			return net.JoinHostPort(ip.IP.String(), port), nil
		}
	}
	return "", fmt.Errorf("%w: no advertise address given and the host has no non-loopback IPv4 address", ErrConfig)
}
