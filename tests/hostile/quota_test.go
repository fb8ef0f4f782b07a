package hostile

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/server"
)

// once is a client of token that never retries, so a test sees the
// server's first answer.
func (e *env) once(t testing.TB, token string) *client.Client {
	t.Helper()
	c, err := client.New(e.ts.URL, client.WithToken(token), client.WithRetry(client.Retry{MaxAttempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// wantQuota checks that err is a quota's refusal: resource_exhausted with
// the quota's sentinel in its message, retriable for the append byte rate
// and not for the stream quota.
func wantQuota(t *testing.T, what string, err, quota error) {
	t.Helper()
	retriable := quota == server.ErrRateQuota
	if connect.CodeOf(err) != connect.CodeResourceExhausted || err == nil || !strings.Contains(err.Error(), quota.Error()) || client.Retriable(err) != retriable {
		t.Errorf("%s: %v, want resource_exhausted %q (retriable %v)", what, err, quota, retriable)
	}
}

// TestTenantStreamQuota (issue 31): a tenant (a root token and the tokens
// minted under it) creates at most Limits.MaxStreamsPerTenant streams:
// minting a token does not multiply it, the one past it is
// resource_exhausted naming the quota and not retriable, another tenant
// is not bothered, and deleting a stream makes room.
func TestTenantStreamQuota(t *testing.T) {
	e := newEnv(t, func(c *server.Config) { c.Limits.MaxStreamsPerTenant = 2 })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rootA := e.api.Issue(t, 9, "team-a/", auth.Admin)
	rootB := e.api.Issue(t, 10, "team-b/", auth.Admin)
	child, _, err := e.client(t, rootA).CreateToken(ctx, client.TokenSpec{Prefix: "team-a/x/", Ops: []string{"admin"}})
	if err != nil {
		t.Fatal(err)
	}
	a, c := e.once(t, rootA), e.once(t, child)
	opt := client.CreateOptions{Class: "express"}
	if _, err := a.CreateStream(ctx, "team-a/1", opt); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStream(ctx, "team-a/x/2", opt); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c    *client.Client
		name string
	}{{a, "team-a/3"}, {c, "team-a/x/3"}} {
		_, err := tc.c.CreateStream(ctx, tc.name, opt)
		wantQuota(t, "a third stream "+tc.name+" of one tenant (quota 2)", err, server.ErrStreamQuota)
	}
	if _, err := e.once(t, rootB).CreateStream(ctx, "team-b/1", opt); err != nil {
		t.Errorf("another tenant's first stream: %v", err)
	}
	if err := a.DeleteStream(ctx, "team-a/1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStream(ctx, "team-a/x/3", opt); err != nil {
		t.Errorf("a stream after one was deleted: %v", err)
	}
}

// TestTenantAppendRate (issue 31): a tenant appends at most
// Limits.AppendBytesPerSecPerTenant metered bytes a second (with its burst,
// at least 1 MiB) on a star, unary and in sessions, whichever of its
// tokens sends them; past it an append is resource_exhausted, retriable,
// and writes nothing; another tenant appends meanwhile.
func TestTenantAppendRate(t *testing.T) {
	e := newEnv(t, func(c *server.Config) { c.Limits.AppendBytesPerSecPerTenant = 1 }) // burst: 1 MiB
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rootA := e.api.Issue(t, 9, "team-a/", auth.Admin)
	rootB := e.api.Issue(t, 10, "team-b/", auth.Admin)
	for i, root := range []string{rootA, rootB} {
		if _, err := e.client(t, root).CreateStream(ctx, fmt.Sprintf("team-%c/s", 'a'+i), client.CreateOptions{Class: "express"}); err != nil {
			t.Fatal(err)
		}
	}
	child, _, err := e.client(t, rootA).CreateToken(ctx, client.TokenSpec{Prefix: "team-a/", Ops: []string{"append", "read"}})
	if err != nil {
		t.Fatal(err)
	}
	big := []client.Record{{Body: bytes.Repeat([]byte("x"), 600<<10)}}
	if _, err := e.once(t, rootA).Append(ctx, "team-a/s", big, client.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = e.once(t, child).Append(ctx, "team-a/s", big, client.AppendOptions{})
	wantQuota(t, "a unary append by a minted token past the tenant's rate", err, server.ErrRateQuota)
	s, err := e.once(t, child).OpenAppendSession(ctx, "team-a/s")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Submit(big, client.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	r := <-s.Acks()
	s.Close()
	wantQuota(t, "a session's append past the tenant's rate", r.Err, server.ErrRateQuota)
	if tail, err := e.client(t, rootA).CheckTail(ctx, "team-a/s"); err != nil || tail.NextSeq != 1 {
		t.Errorf("refused appends wrote something: tail %+v %v, want 1", tail, err)
	}
	if _, err := e.once(t, rootB).Append(ctx, "team-b/s", big, client.AppendOptions{}); err != nil {
		t.Errorf("another tenant's append: %v", err)
	}
}

// TestStartedTenant (ADR 0060): an operator (an admin for every stream)
// creates a token that starts a tenant, with its own quotas: the tokens
// minted under it share them, the operator's own tenant keeps the star's
// (here unlimited); a tenant's member, or a root of a narrower prefix,
// cannot start a tenant (that would multiply its limits); quotas without
// a tenant are invalid.
func TestStartedTenant(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	op := e.once(t, e.admin)
	secret, info, err := op.CreateToken(ctx, client.TokenSpec{Prefix: "t/", Ops: []string{"admin"}, Tenant: true, MaxStreams: 1, AppendBytesPerSec: 1})
	if err != nil || !info.Tenant || info.MaxStreams != 1 || info.AppendBytesPerSec != 1 {
		t.Fatalf("create a tenant: %+v %v", info, err)
	}
	tenant := e.once(t, secret)
	memberSecret, _, err := tenant.CreateToken(ctx, client.TokenSpec{Prefix: "t/x/", Ops: []string{"admin"}})
	if err != nil {
		t.Fatal(err)
	}
	member := e.once(t, memberSecret)
	opt := client.CreateOptions{Class: "express"}
	if _, err := member.CreateStream(ctx, "t/x/1", opt); err != nil {
		t.Fatal(err)
	}
	_, err = tenant.CreateStream(ctx, "t/2", opt)
	wantQuota(t, "the tenant's second stream (its quota 1)", err, server.ErrStreamQuota)
	big := []client.Record{{Body: bytes.Repeat([]byte("x"), 600<<10)}}
	for i := range 2 {
		if _, err := op.CreateStream(ctx, fmt.Sprintf("o/%d", i), opt); err != nil {
			t.Errorf("the operator's stream %d (its tenant unlimited): %v", i, err)
		}
		if _, err := op.Append(ctx, "o/0", big, client.AppendOptions{}); err != nil {
			t.Errorf("the operator's append %d (unlimited): %v", i, err)
		}
	}
	if _, err := member.Append(ctx, "t/x/1", big, client.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = tenant.Append(ctx, "t/x/1", big, client.AppendOptions{})
	wantQuota(t, "the tenant past its own rate", err, server.ErrRateQuota)
	narrow := e.once(t, e.api.Issue(t, 11, "team-n/", auth.Admin))
	for what, c := range map[string]*client.Client{"a tenant's own token": tenant, "a tenant's member": member, "a root of a narrower prefix": narrow} {
		prefix := map[*client.Client]string{tenant: "t/y/", member: "t/x/y/", narrow: "team-n/y/"}[c]
		if _, _, err := c.CreateToken(ctx, client.TokenSpec{Prefix: prefix, Ops: []string{"read"}, Tenant: true}); connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Errorf("%s starts a tenant: %v, want permission_denied", what, err)
		}
	}
	if _, _, err := op.CreateToken(ctx, client.TokenSpec{Prefix: "q/", Ops: []string{"read"}, MaxStreams: 5}); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("quotas without a tenant: %v, want invalid_argument", err)
	}
}

// slowList answers ListStreams, which the stream quota counts with, 20 ms
// after it read the streams, so that creates at once overlap between
// their count and their create.
type slowList struct{ metastore.Store }

func (m slowList) ListStreams(ctx context.Context, prefix, after string, limit int) ([]metastore.Stream, string, error) {
	sts, next, err := m.Store.ListStreams(ctx, prefix, after, limit)
	time.Sleep(20 * time.Millisecond)
	return sts, next, err
}

// TestStreamQuotaUnderConcurrentCreates: creates of one tenant at once on
// one star never pass its stream quota (they are counted one at a time),
// even when counting is slow.
func TestStreamQuotaUnderConcurrentCreates(t *testing.T) {
	e := newEnv(t, func(c *server.Config) {
		c.Limits.MaxStreamsPerTenant = 3
		c.Meta = slowList{c.Meta}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := e.once(t, e.api.Issue(t, 9, "team-c/", auth.Admin))
	errs := make(chan error, 8)
	for i := range 8 {
		go func() {
			_, err := c.CreateStream(ctx, fmt.Sprintf("team-c/%d", i), client.CreateOptions{Class: "express"})
			errs <- err
		}()
	}
	created := 0
	for range 8 {
		if err := <-errs; err == nil {
			created++
		} else {
			wantQuota(t, "a create past the quota", err, server.ErrStreamQuota)
		}
	}
	if created != 3 {
		t.Errorf("8 creates at once under a quota of 3: %d created", created)
	}
}
