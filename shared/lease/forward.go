package lease

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Forwarder is a standby's API port: every connection it accepts is
// relayed, byte for byte, to the leader's address (the lease's Addr), so
// a load balancer that routes to both tasks of a star reaches the leader
// through either. A connection while no leader is known is closed at once
// (the client sees a reset and retries). Close stops accepting and ends
// every relayed connection, so clients reconnect and find the new leader.
type Forwarder struct {
	target func() string // the leader's host:port; "" when none
	dial   time.Duration
	log    *slog.Logger

	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewForwarder relays connections accepted on ln to target(), dialing
// with a timeout of dial (0: 1 s). Serve it with Serve.
func NewForwarder(ln net.Listener, target func() string, dial time.Duration, log *slog.Logger) *Forwarder {
	if dial <= 0 {
		dial = time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Forwarder{ln: ln, target: target, dial: dial, log: log, conns: map[net.Conn]struct{}{}}
}

// Serve accepts until Close; it returns nil after Close.
func (f *Forwarder) Serve() error {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			f.mu.Lock()
			closed := f.closed
			f.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		if !f.track(c) {
			c.Close()
			return nil
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer f.untrack(c)
			f.relay(c)
		}()
	}
}

func (f *Forwarder) relay(c net.Conn) {
	defer c.Close()
	to := f.target()
	if to == "" {
		return
	}
	up, err := net.DialTimeout("tcp", to, f.dial)
	if err != nil {
		f.log.Debug("standby: leader not reachable", "leader", to, "err", err.Error())
		return
	}
	if !f.track(up) {
		up.Close()
		return
	}
	defer f.untrack(up)
	defer up.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite() // pass the half-close on
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
}

func (f *Forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *Forwarder) untrack(c net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.conns, c)
}

// Close stops accepting, ends every relayed connection and waits for
// the relays to finish. The listener's port is free when it returns.
func (f *Forwarder) Close() {
	f.mu.Lock()
	f.closed = true
	_ = f.ln.Close()
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}
