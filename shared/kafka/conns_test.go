package kafka

import (
	"context"
	crand "crypto/rand"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/metastore"
)

// connsServer serves a front end with limits l (and SASL against a
// metastore holding tok's grant, when withAuth) on a loopback listener.
func connsServer(t *testing.T, l Limits, withAuth bool) (addr, tok string) {
	t.Helper()
	_, addr, tok = connsServe(t, l, withAuth)
	return addr, tok
}

// connsServe is connsServer that also returns the front end.
func connsServe(t *testing.T, l Limits, withAuth bool) (s *Server, addr, tok string) {
	t.Helper()
	cfg := Config{Core: newHandoverCore("s1", &handoverLog{next: map[string]uint64{}}), Star: "s1", Limits: l}
	if withAuth {
		meta := metastore.NewMem()
		var err error
		tok, err = auth.NewToken(crand.Reader)
		if err == nil {
			err = auth.Issue(context.Background(), meta, tok, "t/", []auth.Op{auth.Read})
		}
		if err != nil {
			t.Fatal(err)
		}
		cfg.Auth = &auth.Checker{Meta: meta}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return s, ln.Addr().String(), tok
}

// dialFrom dials addr from the loopback address src (all of 127/8 is
// this host's).
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestConnsPerSource: one source address opens 4 connections to a front
// end of 4 with 2 per source: its last 2 are closed at once, and another
// source's 2 connections are served. Before MaxConnsPerSource the first
// source took the whole table and the other's were refused.
func TestConnsPerSource(t *testing.T) {
	addr, _ := connsServer(t, Limits{MaxConns: 4, MaxConnsPerSource: 2}, false)
	var mine []net.Conn
	for i := range 4 {
		c := dialFrom(t, "127.0.0.1", addr)
		if i < 2 {
			exchange(t, c, 1, kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrApiVersionsResponse())
		}
		mine = append(mine, c)
	}
	for i, c := range mine[2:] {
		if !closedWithin(c, 2*time.Second) {
			t.Fatalf("connection %d of one source is open past its limit of 2", i+3)
		}
	}
	for range 2 {
		c := dialFrom(t, "127.0.0.2", addr)
		exchange(t, c, 1, kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrApiVersionsResponse())
	}
	for i, c := range mine[:2] {
		if closedWithin(c, 100*time.Millisecond) {
			t.Fatalf("connection %d of the first source, within its limit, was closed", i+1)
		}
	}
}

// TestStrangersShedForTenant: with SASL required and a table of 4, a
// tenant's authenticated connection and 3 strangers fill it; a flood of
// 8 more strangers sheds the oldest strangers one by one, never the
// tenant's; and the tenant's next connection is admitted (a stranger
// shed for it) and authenticates. Before, the table full refused every
// new connection: the flood and the tenant's new one were closed at once.
func TestStrangersShedForTenant(t *testing.T) {
	addr, tok := connsServer(t, Limits{MaxConns: 4}, true)
	tenant := saslDial(t, addr, tok)
	var strangers []net.Conn
	for range 3 + 8 {
		c := dialFrom(t, "127.0.0.1", addr)
		// ApiVersions answered: the stranger is in the table.
		exchange(t, c, 1, kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrApiVersionsResponse())
		strangers = append(strangers, c)
	}
	for i, c := range strangers[:8] {
		if !closedWithin(c, 2*time.Second) {
			t.Fatalf("stranger %d, of the oldest, was not shed for the newer ones", i+1)
		}
	}
	again := saslDial(t, addr, tok)
	exchange(t, again, 3, kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrApiVersionsResponse())
	exchange(t, tenant, 3, kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrApiVersionsResponse())
	if !closedWithin(strangers[8], 2*time.Second) {
		t.Fatal("the oldest stranger left was not shed for the tenant's connection")
	}
}

// saslCode runs SASL/PLAIN with token on a new connection from 127.0.0.1
// and returns the connection and SaslAuthenticate's error code.
func saslCode(t *testing.T, addr, token string) (net.Conn, int16) {
	t.Helper()
	c := dialFrom(t, "127.0.0.1", addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, mechPlain
	exchange(t, c, 1, hs, kmsg.NewPtrSASLHandshakeResponse())
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 1, []byte("\x00u\x00"+token)
	ar := kmsg.NewPtrSASLAuthenticateResponse()
	exchange(t, c, 2, au, ar)
	return c, ar.ErrorCode
}

// TestRelayedTenantConnsServed (ADR 0074): a standby relays its clients'
// connections to the leader from its own address (ADR 0051). 300
// connections that authenticate by SASL from one source are all served
// (they count in their tenant's share, 512, not the source's 256); 300
// strangers from that source are still held to 256. Before, the 257th
// authenticated connection was closed at accept.
func TestRelayedTenantConnsServed(t *testing.T) {
	addr, tok := connsServer(t, Limits{}, true)
	var tenant []net.Conn
	for i := range 300 {
		c, code := saslCode(t, addr, tok)
		if code != 0 {
			t.Fatalf("relayed connection %d: SASL error %d", i+1, code)
		}
		tenant = append(tenant, c)
	}
	for _, c := range tenant {
		exchange(t, c, 3, kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrApiVersionsResponse())
	}
	var strangers []net.Conn
	for range 300 {
		strangers = append(strangers, dialFrom(t, "127.0.0.1", addr))
	}
	for _, c := range strangers[:DefaultMaxConnsPerSource] {
		exchange(t, c, 1, kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrApiVersionsResponse())
	}
	for i, c := range strangers[DefaultMaxConnsPerSource:] {
		if !closedWithin(c, 2*time.Second) {
			t.Fatalf("stranger %d of one source is open past its limit of %d", DefaultMaxConnsPerSource+i+1, DefaultMaxConnsPerSource)
		}
	}
}

// TestTenantConnShare: with a table of 4, a tenant's connections take at
// most half (2): its third SASL exchange fails and that connection stays
// a stranger, closed at the AuthDeadline; once one of its connections
// closes, a new one authenticates. Before, SASL charged no tenant: the
// third authenticated.
func TestTenantConnShare(t *testing.T) {
	addr, tok := connsServer(t, Limits{MaxConns: 4, MaxConnsPerTenant: 3, AuthDeadline: 300 * time.Millisecond}, true)
	first, _ := saslCode(t, addr, tok)
	saslCode(t, addr, tok)
	third, code := saslCode(t, addr, tok)
	if code == 0 {
		t.Fatal("a tenant's third connection authenticated past its share of 2 (half of 4)")
	}
	if !closedWithin(third, 2*time.Second) {
		t.Fatal("the connection refused its tenant's share is open past the auth deadline")
	}
	first.Close()
	deadline := time.Now().Add(2 * time.Second)
	for {
		_, code := saslCode(t, addr, tok)
		if code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tenant's share was not given back when its connection closed (SASL error %d)", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConnCountsMatchTable: the source and tenant counts add up to the
// open connections (a stranger counts in its source, a connection that
// authenticated in its tenant, one refused its tenant's share stays in
// its source) and are all given back once the connections close.
func TestConnCountsMatchTable(t *testing.T) {
	s, addr, tok := connsServe(t, Limits{MaxConns: 8, MaxConnsPerTenant: 2}, true)
	counted := func() (sources, tenants, open int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, n := range s.sources {
			sources += n
		}
		return sources, s.tenants.total, len(s.conns)
	}
	var clients []net.Conn
	for i := range 3 {
		c, code := saslCode(t, addr, tok)
		if (code == 0) != (i < 2) {
			t.Fatalf("tenant's connection %d (share 2): SASL error %d", i+1, code)
		}
		clients = append(clients, c)
	}
	stranger := dialFrom(t, "127.0.0.2", addr)
	exchange(t, stranger, 1, kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrApiVersionsResponse())
	clients = append(clients, stranger)
	if src, ten, open := counted(); src != 2 || ten != 2 || open != 4 {
		t.Fatalf("counted %d by source and %d by tenant of %d open, want 2 and 2", src, ten, open)
	}
	for _, c := range clients {
		c.Close()
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		src, ten, open := counted()
		if src == 0 && ten == 0 && open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after every connection closed: %d by source, %d by tenant, %d open", src, ten, open)
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.tenants.by) != 0 {
		t.Fatalf("tenants left counted: %v", s.tenants.by)
	}
}
