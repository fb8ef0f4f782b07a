package server

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// review4: calls of several tenants multiplexed on one HTTP/2 connection
// authenticate it at once, while it is shed or closed: it is charged to
// one tenant at most, and its close gives every count back (a count
// left would shrink that tenant's share, or its source's, for good).
func TestReview4MultiplexedChargesGivenBack(t *testing.T) {
	ln, addr, accepted := listen(t, ConnLimits{MaxConns: 64, MaxConnsPerTenant: 8})
	cl := ln.(*connListener)
	for round := range 20 {
		dial(t, addr)
		lc := accept(t, accepted).(*limitConn)
		ctx := context.WithValue(context.Background(), connKey{}, lc)
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i == round%8 {
					_ = lc.Close()
					return
				}
				_ = markAuthenticated(ctx, fmt.Sprintf("tenant-%d", i%3))
			}()
		}
		wg.Wait()
		_ = lc.Close()
		cl.mu.Lock()
		conns, sources, tenants := len(cl.conns), len(cl.sources), len(cl.tenants)
		cl.mu.Unlock()
		if conns != 0 || sources != 0 || tenants != 0 {
			t.Fatalf("round %d: after the close: %d connections, sources %v, tenants %v counted; want none", round, conns, cl.sources, cl.tenants)
		}
	}
}
