package kafka

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/shared/auth"
)

// ErrTooManyConns: a tenant's SASL exchange would take more than its
// share of the front end's connections.
var ErrTooManyConns = errors.New("kafka: too many connections")

// ErrTenantChanged: a connection's second SASL exchange proved another
// tenant's token than its first (KIP-368 re-authentication keeps the
// principal): the connection stays its first tenant's.
var ErrTenantChanged = errors.New("kafka: a connection cannot change tenant")

// connSlot is an open connection's place in the front end's table
// (Server.conns): its source, when it was accepted, whether it has
// authenticated (set once; the SASL exchange, or at accept when no
// authentication applies to it), and the tenant it is charged to once
// its SASL exchange named one ("": charged to its source; under s.mu);
// gone once forgotten (under s.mu).
type connSlot struct {
	src    string
	at     time.Time
	authed atomic.Bool
	tenant string
	gone   bool
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

// charge moves sl, whose SASL exchange has just proved tenant's token,
// from its source's count to tenant's share of the table
// (Limits.MaxConnsPerTenant, at most half of MaxConns). A tenant at its
// share gets ErrTooManyConns and sl stays a stranger, closed at the
// AuthDeadline; a connection charged already (a second SASL exchange
// of the same tenant; another tenant's is ErrTenantChanged), or
// forgotten already (shed for another while its exchange was being
// checked), stays where it is.
func (s *Server) charge(sl *connSlot, tenant string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sl.tenant != "" && sl.tenant != tenant {
		return fmt.Errorf("%w: it authenticated as tenant %s first, now %s", ErrTenantChanged, shortTenant(sl.tenant), shortTenant(tenant))
	}
	if sl.tenant != "" || sl.gone {
		return nil
	}
	if !s.tenants.take(tenant) {
		return fmt.Errorf("%w: tenant %s already has %d connections to this front end (its share of %d)", ErrTooManyConns, shortTenant(tenant), s.tenants.per, s.lim.MaxConns)
	}
	s.unsource(sl.src)
	sl.tenant = tenant
	return nil
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
	sl.gone = true
	if sl.tenant != "" {
		s.tenants.put(sl.tenant)
		return
	}
	s.unsource(sl.src)
}

// unsource takes one connection off src's count. Called with s.mu.
func (s *Server) unsource(src string) {
	if s.sources[src]--; s.sources[src] <= 0 {
		delete(s.sources, src)
	}
}
