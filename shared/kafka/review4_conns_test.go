package kafka

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// review4: a connection shed for a new one (admit at MaxConns) while its
// SASL exchange is being checked must not be charged to its tenant after
// it was forgotten: the tenant's share would keep it for good (its
// goroutine's forget finds nothing to give back) and its source would be
// taken off twice.
func TestReview4ShedConnNotChargedAfter(t *testing.T) {
	s, err := New(Config{Core: newHandoverCore("s1", &handoverLog{next: map[string]uint64{}}), Star: "s1",
		Limits: Limits{MaxConns: 2, MaxConnsPerSource: 3, MaxConnsPerTenant: 1}})
	if err != nil {
		t.Fatal(err)
	}
	pipe := func(port int) net.Conn {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		return &addrConn{Conn: a, remote: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: port}}
	}
	s.mu.Lock()
	// Auth is nil here, so admit marks each authed; unmark to make strangers.
	mid := pipe(1)
	first, _, _ := s.admit(mid)
	first.authed.Store(false)
	other, _, _ := s.admit(pipe(2))
	other.authed.Store(false)
	// A third connection sheds the oldest stranger: mid, whose SASL
	// exchange is still being checked.
	third, victim, why := s.admit(pipe(3))
	s.mu.Unlock()
	if third == nil || victim != mid {
		t.Fatalf("admit at the limit: slot %v victim %v (%s), want mid shed", third, victim, why)
	}
	// mid's SASL exchange ends after it was shed.
	_ = s.charge(first, "tenant-a")
	s.mu.Lock()
	s.forget(mid) // its goroutine ends
	sources, tenants := s.sources["10.0.0.1"], s.tenants.total
	s.mu.Unlock()
	if tenants != 0 || sources != 2 {
		t.Fatalf("after the shed connection's SASL: tenants hold %d (want 0), source counts %d (want 2, the two open)", tenants, sources)
	}
	// The tenant's one share is still free for its next connection.
	s.mu.Lock()
	s.forget(victim)
	s.mu.Unlock()
	if err := s.charge(third, "tenant-a"); err != nil {
		t.Fatalf("the tenant's next connection: %v", err)
	}
}

// addrConn is a net.Conn with a chosen remote address.
type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c *addrConn) RemoteAddr() net.Addr { return c.remote }

// review4: a Fetch whose bound is a tenant's whole share (MaxFetchBytes
// at least half of MaxHeldBytes) waited for good for room its own request
// bytes held: the answer that would free them could never be made. It is
// answered, and its request and answer together hold at most the share.
func TestReview4FetchAtShareAnswered(t *testing.T) {
	s, err := New(Config{Core: recordsCore{newHandoverCore("s1", &handoverLog{next: map[string]uint64{}})}, Star: "s1",
		Limits: Limits{MaxHeldBytes: 4 << 20, MaxFetchBytes: 8 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(s.ctx, 2*time.Second)
	defer cancel()
	cn := &conn{s: s, remote: "test", ctx: s.ctx, stop: ctx, authed: true}
	r := &request{kreq: fetchT(100<<20, 100<<20), tenant: "a", held: 100}
	if err := s.held.take(ctx, r.tenant, r.held); err != nil { // as readRequest does
		t.Fatal(err)
	}
	resp, err := cn.handleNow(r)
	if err != nil {
		t.Fatalf("a fetch of a tenant holding only its own request: %v", err)
	}
	if got := fetchedBytes(resp); got == 0 || r.held > s.held.max/2 {
		t.Fatalf("answered %d bytes holding %d, want an answer within the share %d", got, r.held, s.held.max/2)
	}
}

// review4: a connection charged to tenant a that authenticates again
// (SASL re-authentication) with tenant b's token would serve b while a's
// share pays for it, so b could hold more than its share. A second
// exchange keeps the tenant (as Kafka's KIP-368 keeps the principal).
func TestReview4ReauthKeepsTenant(t *testing.T) {
	s, err := New(Config{Core: newHandoverCore("s1", &handoverLog{next: map[string]uint64{}}), Star: "s1",
		Limits: Limits{MaxConns: 8, MaxConnsPerTenant: 1}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := &connSlot{src: "10.0.0.1"}, &connSlot{src: "10.0.0.1"}
	s.sources["10.0.0.1"] = 2
	if err := s.charge(a, "tenant-a"); err != nil {
		t.Fatal(err)
	}
	if err := s.charge(a, "tenant-a"); err != nil {
		t.Fatalf("re-authentication as the same tenant: %v", err)
	}
	if err := s.charge(a, "tenant-b"); !errors.Is(err, ErrTenantChanged) {
		t.Fatalf("re-authentication as another tenant: %v, want ErrTenantChanged", err)
	}
	if err := s.charge(b, "tenant-b"); err != nil {
		t.Fatalf("tenant b's own connection: %v", err)
	}
	if s.tenants.by["tenant-a"] != 1 || s.tenants.by["tenant-b"] != 1 {
		t.Fatalf("shares %v, want one each", s.tenants.by)
	}
}
