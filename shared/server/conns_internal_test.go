package server

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// listen starts a listener with limits l that hands accepted connections
// to the returned channel.
func listen(t *testing.T, l ConnLimits) (net.Listener, string, chan net.Conn) {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := NewListener(raw, l)
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	return ln, raw.Addr().String(), accepted
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closed reports whether the server closed the client's end c within d.
func closed(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	return err == io.EOF
}

func accept(t *testing.T, ch chan net.Conn) net.Conn {
	t.Helper()
	select {
	case c := <-ch:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no connection accepted")
		return nil
	}
}

// TestListenerWaitsWhenBusy: past MaxConns with every connection
// authenticated and busy, Accept waits until one closes.
func TestListenerWaitsWhenBusy(t *testing.T) {
	_, addr, ch := listen(t, ConnLimits{MaxConns: 2, IdleShed: time.Hour})
	dial(t, addr)
	dial(t, addr)
	first, second := accept(t, ch), accept(t, ch)
	first.(*limitConn).authed.Store(true)
	second.(*limitConn).authed.Store(true)
	dial(t, addr)
	select {
	case <-ch:
		t.Fatal("a third connection was accepted past the bound of 2 while both are busy")
	case <-time.After(200 * time.Millisecond):
	}
	first.Close()
	first.Close() // a second close releases nothing more
	accept(t, ch).Close()
	second.Close()
}

// TestListenerShedsStrangersThenIdle: past MaxConns a new connection sheds
// the oldest that never authenticated, else the longest idle.
func TestListenerShedsStrangersThenIdle(t *testing.T) {
	_, addr, ch := listen(t, ConnLimits{MaxConns: 2, IdleShed: 50 * time.Millisecond})
	c1 := dial(t, addr)
	s1 := accept(t, ch)
	c2 := dial(t, addr)
	s2 := accept(t, ch)
	s2.(*limitConn).authed.Store(true)
	dial(t, addr)
	s3 := accept(t, ch)
	if !closed(c1, 2*time.Second) {
		t.Error("the stranger's connection was not shed for a new one")
	}
	_ = s1
	s3.(*limitConn).authed.Store(true)
	time.Sleep(100 * time.Millisecond) // both idle now; s2 the longest
	if _, err := s3.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	dial(t, addr)
	accept(t, ch)
	if !closed(c2, 2*time.Second) {
		t.Error("the longest idle connection was not shed for a new one")
	}
}

// TestListenerPerSourceAndDeadline: a source's connection past
// MaxConnsPerSource is closed at once; one that never authenticates is
// closed at AuthDeadline, an authenticated one is not.
func TestListenerPerSourceAndDeadline(t *testing.T) {
	_, addr, ch := listen(t, ConnLimits{MaxConnsPerSource: 2, AuthDeadline: 200 * time.Millisecond})
	c1, c2 := dial(t, addr), dial(t, addr)
	s1, _ := accept(t, ch), accept(t, ch)
	s1.(*limitConn).authed.Store(true)
	s1.(*limitConn).timer.Stop()
	if c3 := dial(t, addr); !closed(c3, 2*time.Second) {
		t.Error("a third connection of one source past its cap of 2 was kept")
	}
	if !closed(c2, 2*time.Second) {
		t.Error("a connection that never authenticated was kept past the deadline")
	}
	if closed(c1, 400*time.Millisecond) {
		t.Error("an authenticated connection was closed at the deadline")
	}
}

// TestEveryProcedureNeedsAnOperation: every procedure of the service has
// the operations that let a token call it, so none skips the check made
// before its body is read.
func TestEveryProcedureNeedsAnOperation(t *testing.T) {
	for _, p := range procedures() {
		if len(procedureOps[p]) == 0 {
			t.Errorf("%s has no operation in procedureOps: its body would be read before any permission check", p)
		}
	}
}

// TestListenerChargesTenants: a connection marked by a call with a
// tenant's token leaves its source's count for the tenant's, so one
// source holds more than MaxConnsPerSource authenticated connections; a
// tenant's connection past its share (half of MaxConns) is refused
// ErrTooManyConns, stays a stranger and is closed at the deadline; every
// count is given back when the connections close (sources and tenants
// count exactly the open connections).
func TestListenerChargesTenants(t *testing.T) {
	ln, addr, ch := listen(t, ConnLimits{MaxConns: 8, MaxConnsPerSource: 2, AuthDeadline: 300 * time.Millisecond})
	cl := ln.(*connListener)
	counted := func() (sources, tenants, open int) {
		cl.mu.Lock()
		defer cl.mu.Unlock()
		for _, n := range cl.sources {
			sources += n
		}
		for _, n := range cl.tenants {
			tenants += n
		}
		return sources, tenants, len(cl.conns)
	}
	var clients []net.Conn
	var served []*limitConn
	for i := range 5 {
		clients = append(clients, dial(t, addr))
		lc := accept(t, ch).(*limitConn)
		served = append(served, lc)
		err := markAuthenticated(context.WithValue(context.Background(), connKey{}, lc), "a")
		if i < 4 && err != nil {
			t.Fatalf("connection %d of tenant a (share 4): %v", i+1, err)
		}
		if i == 4 && !errors.Is(err, ErrTooManyConns) {
			t.Fatalf("tenant a's fifth connection (share 4): %v, want ErrTooManyConns", err)
		}
	}
	if s, n, open := counted(); s != 1 || n != 4 || open != 5 {
		t.Fatalf("counted %d by source and %d by tenant of %d open, want 1 and 4", s, n, open)
	}
	if !closed(clients[4], 2*time.Second) {
		t.Error("the connection refused its tenant's share was kept past the deadline")
	}
	for i, c := range clients[:4] {
		if closed(c, time.Millisecond) {
			t.Errorf("tenant a's connection %d, within its share, was closed", i+1)
		}
		served[i].Close() // as the HTTP server does when its client goes
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		s, n, open := counted()
		if s == 0 && n == 0 && open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after every connection closed: %d by source, %d by tenant, %d open", s, n, open)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
