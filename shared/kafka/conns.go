package kafka

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/shared/auth"
)

// connSlot is an open connection's place in the front end's table
// (Server.conns): its source, when it was accepted, and whether it has
// authenticated (set once; the SASL exchange, or at accept when no
// authentication applies to it).
type connSlot struct {
	src    string
	at     time.Time
	authed atomic.Bool
}

// admit takes a place for c, just accepted, or says why not (the
// connection is then closed by the caller, with victim nil). The rules are
// the API's (server.NewListener), checked under s.mu:
//
//   - a source address holds at most Limits.MaxConnsPerSource;
//   - at Limits.MaxConns, the oldest connection that has not authenticated
//     is closed for the new one (victim, to close once s.mu is released);
//     when every one has authenticated, the new one is refused.
//
// A stranger's connections therefore never keep a tenant's new connection
// out: they are shed first, and closed at the AuthDeadline anyway.
func (s *Server) admit(c net.Conn) (sl *connSlot, victim net.Conn, why string) {
	src := auth.Source(c.RemoteAddr().String())
	if s.sources[src] >= s.lim.MaxConnsPerSource {
		return nil, nil, "at its source's connection limit"
	}
	if len(s.conns) >= s.lim.MaxConns {
		for oc, o := range s.conns {
			if !o.authed.Load() && (victim == nil || o.at.Before(s.conns[victim].at)) {
				victim = oc
			}
		}
		if victim == nil {
			return nil, nil, "at the connection limit, every connection authenticated"
		}
		s.forget(victim)
	}
	sl = &connSlot{src: src, at: time.Now()}
	if s.cfg.Auth == nil || s.cfg.AnonymousLoopback && isLoopback(c.RemoteAddr()) {
		sl.authed.Store(true) // no authentication applies to it
	}
	s.conns[c] = sl
	s.sources[src]++
	return sl, victim, ""
}

// forget gives c's place back (once: a connection shed for another is
// forgotten when it is shed, not when its goroutine ends). Called with
// s.mu.
func (s *Server) forget(c net.Conn) {
	sl, ok := s.conns[c]
	if !ok {
		return
	}
	delete(s.conns, c)
	if s.sources[sl.src]--; s.sources[sl.src] <= 0 {
		delete(s.sources, sl.src)
	}
}
