package metastore

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// LeasePrefix is the partition key prefix of a star's leadership lease
// (LEASE#<star>/META). Part of the stored format: do not change it.
const LeasePrefix = "LEASE#"

// LeasePK is the partition key of star's leadership lease.
func LeasePK(star string) string { return LeasePrefix + star }

// Bounds of a lease's fields (ValidateLease).
const (
	// MaxLeaseHolderLen bounds Lease.Holder and Lease.Addr, in bytes.
	MaxLeaseHolderLen = 256
	// MaxLeaseTTLMs bounds Lease.TTLMs: a lease that outlives a holder's
	// death by more than a minute is a misconfiguration, not a lease.
	MaxLeaseTTLMs = 60_000
)

// Lease is the LEASE#<star>/META item: which task of a star leads it, for
// the warm standby (ADR 0051). The lease only decides which task tries to
// lead; the epoch fence (MintEpoch's compare-and-set) stays what keeps
// two leaders from both committing.
//
// The store keeps no clock: TTLMs is a promise the holder makes, measured
// by each reader on its own clock from when it first saw this Version
// (shared/lease), so clock skew between tasks does not matter, only the
// rate at which their clocks run.
type Lease struct {
	Star string // the star it leads
	// Holder names the task that holds it ("" when released: anyone may
	// take it at once).
	Holder string
	// Addr is where the holder serves the API (host:port), for a standby
	// to forward to; "" when released.
	Addr string
	// Version counts the writes (take, renew, release): 1 for the first.
	Version uint64
	// TTLMs: a reader that sees the same Version for this long may take
	// the lease over. 1 to MaxLeaseTTLMs.
	TTLMs int64
}

// Released reports whether nobody holds l.
func (l Lease) Released() bool { return l.Holder == "" }

func (l Lease) String() string {
	if l.Released() {
		return fmt.Sprintf("lease of %s: released (v%d)", l.Star, l.Version)
	}
	return fmt.Sprintf("lease of %s: %s at %s (v%d, ttl %d ms)", l.Star, l.Holder, l.Addr, l.Version, l.TTLMs)
}

// Leases is the leadership lease contract; every Store implementation
// also implements it (the conformance suite checks it).
//
//   - GetLease returns the star's lease (a strongly consistent read), or
//     ErrNotFound before the first PutLease.
//   - PutLease(l) writes l on condition that the stored Version is
//     l.Version-1 (no item counts as version 0): take, renew and release
//     are all this one compare-and-set. It returns the stored lease: l
//     when written; on ErrConflict the lease that is stored (the zero
//     Lease when there is none), so the caller sees who holds it without
//     a second read. An invalid l (ValidateLease) is ErrInvalid and writes
//     nothing.
//
// A write whose answer was lost may be retried by the adapter (DynamoDB:
// the transaction's client token makes the retry report success); a
// caller that sees ErrConflict with exactly the lease it wrote stored has
// written it.
type Leases interface {
	GetLease(ctx context.Context, star string) (Lease, error)
	PutLease(ctx context.Context, l Lease) (Lease, error)
}

// ValidateLease checks a lease given to PutLease: a valid star id, Version
// at least 1, TTLMs within 1 to MaxLeaseTTLMs, Holder and Addr at most
// MaxLeaseHolderLen bytes of UTF-8 without control characters, and Addr
// empty exactly when Holder is (a released lease names nobody).
func ValidateLease(l Lease) error {
	if err := validateStar(l.Star); err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	if l.Version == 0 {
		return fmt.Errorf("%w: lease of %s: version 0 (the first write is version 1)", ErrInvalid, l.Star)
	}
	if l.TTLMs < 1 || l.TTLMs > MaxLeaseTTLMs {
		return fmt.Errorf("%w: lease of %s: ttl %d ms, want 1 to %d", ErrInvalid, l.Star, l.TTLMs, MaxLeaseTTLMs)
	}
	for _, f := range []struct{ name, v string }{{"holder", l.Holder}, {"addr", l.Addr}} {
		if len(f.v) > MaxLeaseHolderLen || !utf8.ValidString(f.v) || strings.IndexFunc(f.v, unicode.IsControl) >= 0 {
			return fmt.Errorf("%w: lease of %s: %s: at most %d bytes of UTF-8 without control characters", ErrInvalid, l.Star, f.name, MaxLeaseHolderLen)
		}
	}
	if (l.Holder == "") != (l.Addr == "") {
		return fmt.Errorf("%w: lease of %s: holder %q with addr %q (both or neither)", ErrInvalid, l.Star, l.Holder, l.Addr)
	}
	return nil
}

// LeaseOn is PutLease's decision on the stored lease (found false: none):
// nil when next may be written over it, else ErrConflict.
func LeaseOn(cur Lease, found bool, next Lease) error {
	var v uint64
	if found {
		v = cur.Version
	}
	if v != next.Version-1 {
		return fmt.Errorf("put lease of %s v%d over v%d: %w", next.Star, next.Version, v, ErrConflict)
	}
	return nil
}

var _ Leases = (*Mem)(nil)

// GetLease implements Leases.
func (m *Mem) GetLease(ctx context.Context, star string) (Lease, error) {
	if err := ctxErr(ctx, "get lease"); err != nil {
		return Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.leases[star]
	if !ok {
		return Lease{}, fmt.Errorf("lease of %s: %w", star, ErrNotFound)
	}
	return l, nil
}

// PutLease implements Leases.
func (m *Mem) PutLease(ctx context.Context, l Lease) (Lease, error) {
	if err := ctxErr(ctx, "put lease"); err != nil {
		return Lease{}, err
	}
	if err := ValidateLease(l); err != nil {
		return Lease{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.leases[l.Star]
	if err := LeaseOn(cur, ok, l); err != nil {
		return cur, err
	}
	if m.leases == nil {
		m.leases = make(map[string]Lease)
	}
	m.leases[l.Star] = l
	return l, nil
}
