package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// Per-tenant quotas (issue 31, ADR 0060). A tenant is a token tree
// (auth.Grant.Tenant): a root's, or one started by a token created with
// CreateTokenRequest.tenant, whose quotas (auth.Grant.MaxStreams,
// AppendBytesPerSec) replace the star's when not 0. Without
// authentication there are no tenants and no quotas. The star's are off
// by default (0: unlimited), so a single-tenant deployment never meets
// them.
//
//   - Streams: a tenant has at most Limits.MaxStreamsPerTenant streams,
//     counted as the active streams named under its root token's prefix
//     (auth.Grant.TenantPrefix) when it creates one. A CreateStream past it
//     is ResourceExhausted with ErrStreamQuota, not retriable: it passes
//     only once the tenant deletes a stream.
//   - Append bytes: a tenant appends at most
//     Limits.AppendBytesPerSecPerTenant metered bytes a second on one
//     server, with a burst of Limits.AppendBurstBytesPerTenant, checked
//     in memory (no metastore traffic on the write path). An append past
//     it is ResourceExhausted with ErrRateQuota, retriable after the wait
//     its message says; nothing is written.

// Sentinel errors of the quotas.
var (
	// ErrStreamQuota: the tenant has as many streams as its quota allows.
	// Not retriable (delete a stream first).
	ErrStreamQuota = errors.New("server: stream quota exceeded")
	// ErrRateQuota: the tenant's appends are over its byte rate on this
	// server. Retriable later.
	ErrRateQuota = errors.New("server: append byte rate over quota")
)

// quotas holds the per-tenant quotas' state on one server.
type quotas struct {
	maxStreams int64 // the star's; 0: unlimited

	createMu sync.Mutex // one CreateStream at a time counts and creates (with a stream quota)

	rate, burst float64 // the star's bytes per second (0: unlimited) and burst setting
	mu          sync.Mutex
	buckets     map[string]*bucket // by tenant
}

// bucket is one tenant's token bucket of append bytes.
type bucket struct {
	tokens, rate, burst float64
	at                  time.Time
}

// maxBuckets bounds the tenants whose buckets are kept; past it the full
// ones (the same as absent) are dropped.
const maxBuckets = 10_000

func newQuotas(l Limits) *quotas {
	return &quotas{maxStreams: int64(l.MaxStreamsPerTenant), rate: float64(l.AppendBytesPerSecPerTenant),
		burst: float64(l.AppendBurstBytesPerTenant), buckets: map[string]*bucket{}}
}

// rateOf is tenant g's append byte rate (its own, else the star's; 0:
// unlimited) and burst: at least one second's and the largest batch, so
// every legal batch can pass.
func (q *quotas) rateOf(g auth.Grant) (rate, burst float64) {
	rate = q.rate
	if g.AppendBytesPerSec > 0 {
		rate = float64(g.AppendBytesPerSec)
	}
	return rate, max(q.burst, rate, format.MaxBatchMeteredBytes)
}

// takeBytes takes n bytes from tenant's bucket of rate and burst at now,
// or returns how long until they are there (taking nothing). Rate 0 is
// unlimited. A tenant whose rate changed (its token looked up again)
// keeps its bytes, up to the new burst.
func (q *quotas) takeBytes(tenant string, rate, burst float64, n int64, now time.Time) time.Duration {
	if rate <= 0 {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	b := q.buckets[tenant]
	if b == nil {
		if len(q.buckets) >= maxBuckets {
			q.prune(now)
		}
		b = &bucket{tokens: burst, at: now}
		q.buckets[tenant] = b
	}
	b.rate, b.burst = rate, burst
	if now.After(b.at) {
		b.tokens = min(burst, b.tokens+rate*now.Sub(b.at).Seconds())
		b.at = now
	}
	b.tokens = min(b.tokens, burst)
	if need := float64(n) - b.tokens; need > 0 {
		return time.Duration(need / rate * float64(time.Second))
	}
	b.tokens -= float64(n)
	return 0
}

// prune drops the buckets that are full at now (q.mu held).
func (q *quotas) prune(now time.Time) {
	for t, b := range q.buckets {
		if b.tokens+b.rate*now.Sub(b.at).Seconds() >= b.burst {
			delete(q.buckets, t)
		}
	}
}

// meteredBytes is the metered size of a batch's records (format.MeteredSize).
func meteredBytes(recs []format.Record) int64 {
	var n int64
	for _, r := range recs {
		n += int64(format.MeteredSize(r))
	}
	return n
}

// appendQuota refuses, ResourceExhausted, an append of recs past its
// tenant's byte rate; nil when within it or without authentication.
func (s *Server) appendQuota(ctx context.Context, stream string, recs []format.Record) error {
	g, ok := auth.FromContext(ctx)
	if !ok {
		return nil
	}
	n := meteredBytes(recs)
	rate, burst := s.quota.rateOf(g)
	wait := s.quota.takeBytes(g.Tenant, rate, burst, n, s.clk.Now())
	if wait == 0 {
		return nil
	}
	return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(
		"%w: an append of %d bytes to %q: tenant %.8s... may append %.0f bytes a second on this server (burst %.0f; its token's append_bytes_per_sec, else --append-bytes-per-sec-per-tenant); nothing written, retry in %v",
		ErrRateQuota, n, stream, g.Tenant, rate, burst, wait.Round(time.Millisecond)))
}

// streamQuota refuses, ResourceExhausted, a CreateStream of a tenant that
// has its quota of streams; otherwise it returns a release to call once
// the stream is created (or not): creates are counted one at a time on
// this server. Without authentication or a quota it does nothing.
func (s *Server) streamQuota(ctx context.Context, name string) (release func(), err error) {
	g, ok := auth.FromContext(ctx)
	limit := s.quota.maxStreams
	if g.MaxStreams > 0 {
		limit = g.MaxStreams
	}
	if !ok || limit <= 0 {
		return func() {}, nil
	}
	s.quota.createMu.Lock()
	n, err := countStreams(ctx, s.cfg.Meta, g.TenantPrefix, limit)
	if err != nil {
		s.quota.createMu.Unlock()
		return nil, toConnect(fmt.Errorf("create stream %q: count the tenant's streams: %w", name, err))
	}
	if n >= limit {
		s.quota.createMu.Unlock()
		return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(
			"%w: create stream %q: tenant %.8s... has %d streams under %q, its quota (its token's max_streams, else --max-streams-per-tenant); delete one first",
			ErrStreamQuota, name, g.Tenant, n, g.TenantPrefix))
	}
	return s.quota.createMu.Unlock, nil
}

// mayStartTenant refuses, PermissionDenied, a CreateToken that starts a
// tenant unless the caller is an admin for every stream (prefix "") in a
// root's tenant: an operator. A tenant's members cannot start tenants,
// which would multiply its per-tenant limits.
func mayStartTenant(g auth.Grant, a CreateTokenArgs) error {
	if !a.Tenant || g.Prefix == "" && !g.Started {
		return nil
	}
	return connect.NewError(connect.CodePermissionDenied, fmt.Errorf(
		"%w: creating a token that starts a tenant needs an admin token for every stream (prefix \"\") outside any tenant a token started; the calling token's prefix is %q", auth.ErrDenied, g.Prefix))
}

// countStreams counts the active streams named under prefix, up to max.
func countStreams(ctx context.Context, meta metastore.Store, prefix string, max int64) (int64, error) {
	var n int64
	for after := ""; n < max; {
		page, next, err := meta.ListStreams(ctx, prefix, after, int(min(max-n+1, 1000)))
		if err != nil {
			return n, err
		}
		for _, st := range page {
			if st.State == metastore.StreamActive {
				n++
			}
		}
		if next == "" {
			break
		}
		after = next
	}
	return n, nil
}
