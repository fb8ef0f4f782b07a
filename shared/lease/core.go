package lease

import (
	"errors"
	"fmt"
	"time"

	"github.com/strandlog/strand/shared/metastore"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrDeposed: the task lost the lease (another task holds it); it must
	// stop serving. A deposed Core stays deposed.
	ErrDeposed = errors.New("lease: deposed")
	// ErrConfig: a Config out of bounds.
	ErrConfig = errors.New("lease: invalid config")
)

// Config is one contender for a star's lease.
type Config struct {
	Star   string // the star
	Holder string // this task, unique per process (ID makes one)
	Addr   string // where this task serves the API when it leads
	// TTL is how long a holder may go without renewing before a standby
	// takes over: the crash detection time. 1 ms to
	// metastore.MaxLeaseTTLMs.
	TTL time.Duration
	// Renew is how often the leader renews (0: TTL/4). Below TTL/2, so
	// that a renewal that fails once is retried before the lease lapses.
	Renew time.Duration
	// Poll is how often a standby reads the lease (0: TTL/10): how soon
	// it sees a release (the SIGTERM handover).
	Poll time.Duration
	// Guard is how much sooner than TTL the leader stops counting itself
	// the leader (0: TTL/10). It covers the rates at which the two tasks'
	// clocks run (not their offsets): with clocks whose rates differ by
	// under Guard/(2 TTL), a leader's own count of its validity ends before
	// a standby's count of the lease's age reaches TTL.
	Guard time.Duration
	// Retry is how soon a failed read or write is tried again (0: Poll).
	Retry time.Duration
}

func (c Config) withDefaults() Config {
	if c.Renew == 0 {
		c.Renew = c.TTL / 4
	}
	if c.Poll == 0 {
		c.Poll = c.TTL / 10
	}
	if c.Guard == 0 {
		c.Guard = c.TTL / 10
	}
	if c.Retry == 0 {
		c.Retry = c.Poll
	}
	return c
}

// Validate checks c (with its defaults filled in).
func (c Config) Validate() error {
	c = c.withDefaults()
	probe := metastore.Lease{Star: c.Star, Holder: c.Holder, Addr: c.Addr, Version: 1, TTLMs: c.TTL.Milliseconds()}
	if err := metastore.ValidateLease(probe); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	switch {
	case c.Holder == "":
		return fmt.Errorf("%w: no holder id", ErrConfig)
	case c.TTL%time.Millisecond != 0:
		return fmt.Errorf("%w: ttl %s is not whole milliseconds", ErrConfig, c.TTL)
	case c.Renew <= 0 || c.Renew >= c.TTL/2:
		return fmt.Errorf("%w: renew every %s with ttl %s: want under ttl/2", ErrConfig, c.Renew, c.TTL)
	case c.Guard <= 0 || c.Guard >= c.TTL-c.Renew:
		return fmt.Errorf("%w: guard %s with ttl %s and renew %s: want 0 < guard < ttl-renew", ErrConfig, c.Guard, c.TTL, c.Renew)
	case c.Poll <= 0 || c.Retry <= 0:
		return fmt.Errorf("%w: poll %s, retry %s: want both positive", ErrConfig, c.Poll, c.Retry)
	}
	return nil
}

// Role is where a contender stands.
type Role uint8

const (
	Standby  Role = iota // waits for the lease
	Leader               // holds it (Leading says whether it is still valid)
	Deposed              // lost it: stop serving; final
	Released             // gave it up (handover); final
)

func (r Role) String() string {
	switch r {
	case Standby:
		return "standby"
	case Leader:
		return "leader"
	case Deposed:
		return "deposed"
	case Released:
		return "released"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// Kind is what an Action asks the driver to do.
type Kind uint8

const (
	Wait  Kind = iota // nothing until Action.Until
	Read              // GetLease, then Observed
	Write             // PutLease(Action.Lease), then Wrote
	Stop              // final: the contender is deposed or released
)

// Action is the Core's next step.
type Action struct {
	Kind  Kind
	Until time.Time       // Wait
	Lease metastore.Lease // Write
}

// Core is the lease's decision logic for one contender: no I/O, no clock.
// The driver asks Next(now) what to do, does it, and reports the answer
// (Observed, Wrote) with the time it arrived. Times are the contender's
// own clock; only durations measured on it matter, never its offset from
// another clock.
//
// The rules (ADR 0051):
//   - A standby reads the lease every Poll. It takes the lease (write
//     Version+1 naming itself) when there is none, when it is released,
//     or when it has seen the same Version for TTL (the lease's stored
//     TTL) on its own clock, counted from the first read that returned it.
//   - A leader renews (write Version+1) every Renew. Its lease is valid
//     until the time it sent the last successful write plus TTL less
//     Guard: the write landed after it was sent, so any standby's count
//     of that version started later. When that time passes without a
//     successful renewal (a slow or unreachable table) it stops leading
//     (Leading is false) but keeps renewing: a renewal that lands means
//     nobody took the lease meanwhile, and it leads again from that
//     renewal's send time. A write that finds another holder deposes it.
//   - Release (the SIGTERM handover) writes Version+1 naming nobody.
type Core struct {
	cfg  Config
	role Role

	// Standby: the lease last read, when that read's answer arrived
	// (obsAt), and when its Version was first seen (seenAt). fresh: read
	// and not yet decided on.
	seen    metastore.Lease
	found   bool // the lease item exists
	hasSeen bool
	fresh   bool
	obsAt   time.Time
	seenAt  time.Time
	nextAt  time.Time

	// The write in flight (at most one) and when it was first sent.
	pending *metastore.Lease
	sentAt  time.Time
	// lost: a standby's take whose answer was lost (it may have landed);
	// the next read tells.
	lost     *metastore.Lease
	lostSent time.Time

	// Leader.
	held       metastore.Lease // the lease as last written by us
	validUntil time.Time
	release    bool // Release was asked for
}

// New returns a standby contender for cfg.
func New(cfg Config) (*Core, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Core{cfg: cfg.withDefaults(), role: Standby}, nil
}

// Role is where the contender stands.
func (c *Core) Role() Role { return c.role }

// Leading reports whether the contender leads at now: it holds the lease
// and its validity has not run out.
func (c *Core) Leading(now time.Time) bool {
	return c.role == Leader && now.Before(c.validUntil)
}

// Holder is the lease as last observed or written: who leads and where.
func (c *Core) Holder() metastore.Lease {
	if c.role == Leader {
		return c.held
	}
	return c.seen
}

// Release asks the contender to give the lease up: a leader writes a
// released lease next, a standby simply stops.
func (c *Core) Release() { c.release = true }

// Next returns what to do at now.
func (c *Core) Next(now time.Time) Action {
	if c.role == Standby && c.release && c.pending == nil {
		c.role = Released
	}
	switch {
	case c.role == Deposed || c.role == Released:
		return Action{Kind: Stop}
	case c.role == Leader && c.release && c.pending == nil: // the handover: at once
		return c.write(now, metastore.Lease{Star: c.cfg.Star, Version: c.held.Version + 1, TTLMs: c.held.TTLMs})
	case now.Before(c.nextAt):
		return Action{Kind: Wait, Until: c.nextAt}
	case c.pending != nil: // a leader's renewal retried after an unknown outcome
		return Action{Kind: Write, Lease: *c.pending}
	case c.role == Leader:
		return c.write(now, c.mine(c.held.Version+1))
	case !c.fresh:
		return Action{Kind: Read}
	}
	// A standby decides on a read it has not decided on yet, never on an
	// older one: the lease's age is counted to when that read's answer
	// arrived.
	c.fresh = false
	switch {
	case !c.found:
		return c.write(now, c.mine(1))
	case c.seen.Released(), c.obsAt.Sub(c.seenAt) >= time.Duration(c.seen.TTLMs)*time.Millisecond:
		return c.write(now, c.mine(c.seen.Version+1))
	}
	c.nextAt = c.obsAt.Add(c.cfg.Poll)
	return Action{Kind: Wait, Until: c.nextAt}
}

func (c *Core) mine(v uint64) metastore.Lease {
	return metastore.Lease{Star: c.cfg.Star, Holder: c.cfg.Holder, Addr: c.cfg.Addr, Version: v, TTLMs: c.cfg.TTL.Milliseconds()}
}

func (c *Core) write(now time.Time, l metastore.Lease) Action {
	c.pending, c.sentAt = &l, now
	return Action{Kind: Write, Lease: l}
}

// Observed takes the answer of a Read that arrived at now: found false
// when there is no lease item yet, err for a failed read (tried again
// after Retry).
func (c *Core) Observed(now time.Time, l metastore.Lease, found bool, err error) {
	if c.role != Standby {
		return
	}
	if err != nil {
		c.nextAt = now.Add(c.cfg.Retry)
		return
	}
	c.observe(now, l, found)
}

// observe records a lease read (or returned by a refused write) at now. A
// lease naming this contender exactly as a write whose answer was lost is
// that write, landed: the contender leads from when it sent it.
func (c *Core) observe(now time.Time, l metastore.Lease, found bool) {
	if c.lost != nil {
		lost, sent := *c.lost, c.lostSent
		c.lost = nil
		if found && l == lost {
			c.lead(sent, l)
			return
		}
	}
	if found && (!c.hasSeen || !c.found || l.Version != c.seen.Version) {
		c.seenAt = now
	}
	c.seen, c.found, c.hasSeen, c.fresh, c.obsAt = l, found, true, true, now
	c.nextAt = now
}

func (c *Core) lead(sentAt time.Time, l metastore.Lease) {
	c.role, c.held = Leader, l
	c.validUntil = sentAt.Add(time.Duration(l.TTLMs)*time.Millisecond - c.cfg.Guard)
	c.nextAt = sentAt.Add(c.cfg.Renew)
}

// Wrote takes the answer of the pending Write that arrived at now: stored
// is what PutLease returned (the current lease on a conflict), err its
// error.
func (c *Core) Wrote(now time.Time, stored metastore.Lease, err error) {
	if c.pending == nil {
		return
	}
	w, sent := *c.pending, c.sentAt
	c.pending = nil
	switch {
	case err == nil || (errors.Is(err, metastore.ErrConflict) && stored == w):
		// Written (a conflict with exactly our write stored is our own
		// write, retried by the adapter after a lost answer).
		if w.Released() {
			c.role, c.held = Released, w
			return
		}
		c.lead(sent, w)
	case errors.Is(err, metastore.ErrConflict):
		// Another write got there first: a leader is deposed; a standby
		// takes the lease returned as a read.
		if c.role == Leader {
			c.role, c.seen = Deposed, stored
			return
		}
		c.observe(now, stored, stored.Version != 0)
	default:
		// Unknown: the write may have landed. A standby reads before it
		// decides again; a leader sends the same write again (by version
		// it lands once: a conflict with exactly it stored is success).
		c.nextAt = now.Add(c.cfg.Retry)
		if c.role == Standby {
			c.lost, c.lostSent = &w, sent
			return
		}
		c.pending, c.sentAt = &w, sent
	}
}
