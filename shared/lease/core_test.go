package lease

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/metastore"
)

var t0 = time.Unix(1_800_000_000, 0)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// cfg: TTL 1 s, renew 250 ms, poll 100 ms, guard 100 ms.
func cfg(holder string) Config {
	return Config{Star: "star-1", Holder: holder, Addr: holder + ":4780", TTL: time.Second}
}

func newCore(t *testing.T, holder string) *Core {
	t.Helper()
	c, err := New(cfg(holder))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func other(v uint64) metastore.Lease {
	return metastore.Lease{Star: "star-1", Holder: "b", Addr: "b:4780", Version: v, TTLMs: 1000}
}

func mine(v uint64) metastore.Lease {
	return metastore.Lease{Star: "star-1", Holder: "a", Addr: "a:4780", Version: v, TTLMs: 1000}
}

func want(t *testing.T, got Action, kind Kind, l metastore.Lease) {
	t.Helper()
	if got.Kind != kind || (kind == Write && got.Lease != l) {
		t.Fatalf("action %+v, want kind %d lease %+v", got, kind, l)
	}
}

// lead makes c the leader: no lease, take v1 sent at ms.
func lead(t *testing.T, c *Core, ms int) {
	t.Helper()
	want(t, c.Next(at(ms)), Read, metastore.Lease{})
	c.Observed(at(ms), metastore.Lease{}, false, nil)
	want(t, c.Next(at(ms)), Write, mine(1))
	c.Wrote(at(ms+5), mine(1), nil)
	if !c.Leading(at(ms + 5)) {
		t.Fatalf("not leading after taking the lease: %s", c.Role())
	}
}

func TestCoreTakesAFreeLease(t *testing.T) {
	c := newCore(t, "a")
	lead(t, c, 0)
	// Valid until the send time + TTL - Guard = 900 ms, not a moment more.
	if !c.Leading(at(899)) || c.Leading(at(900)) {
		t.Fatalf("Leading at 899 ms %v, at 900 ms %v; want true, false", c.Leading(at(899)), c.Leading(at(900)))
	}
}

func TestCoreTakesAReleasedLeaseAtOnce(t *testing.T) {
	c := newCore(t, "a")
	c.Next(at(0))
	c.Observed(at(10), metastore.Lease{Star: "star-1", Version: 7, TTLMs: 1000}, true, nil)
	want(t, c.Next(at(10)), Write, mine(8))
}

// read gives c a read answer at ms and returns its decision on it, as the
// driver does.
func read(c *Core, ms int, l metastore.Lease) Action {
	c.Observed(at(ms), l, true, nil)
	return c.Next(at(ms))
}

func TestCoreWaitsTTLOnItsOwnClockFromTheFirstSight(t *testing.T) {
	c := newCore(t, "a")
	c.Next(at(0))
	for ms := 0; ms < 1000; ms += 100 {
		if a := read(c, ms, other(3)); a.Kind != Wait {
			t.Fatalf("at %d ms: %+v, want a wait (the lease is %d ms old)", ms, a, ms)
		}
		if a := c.Next(at(ms + 100)); a.Kind != Read {
			t.Fatalf("at %d ms: %+v, want a read", ms+100, a)
		}
	}
	want(t, read(c, 1000, other(3)), Write, mine(4))
}

func TestCoreANewVersionRestartsTheCount(t *testing.T) {
	c := newCore(t, "a")
	c.Next(at(0))
	read(c, 0, other(3))
	read(c, 900, other(4)) // renewed
	if a := read(c, 1800, other(4)); a.Kind != Wait {
		t.Fatalf("at 1800 ms: %+v, want a wait (v4 seen 900 ms ago)", a)
	}
	want(t, read(c, 1900, other(4)), Write, mine(5))
}

func TestCoreDecidesOnFreshReadsOnly(t *testing.T) {
	c := newCore(t, "a")
	c.Next(at(0))
	c.Observed(at(0), other(3), true, nil)
	c.Next(at(0)) // decided: wait
	// A pause of 5 s: the last read is 5 s old but told of a 0 ms old
	// lease. The standby reads again before it takes anything.
	if a := c.Next(at(5000)); a.Kind != Read {
		t.Fatalf("after a pause: %+v, want a read", a)
	}
	c.Observed(at(5000), other(9), true, nil) // the leader renewed meanwhile
	if a := c.Next(at(5000)); a.Kind != Wait {
		t.Fatalf("after reading a new version: %+v, want a wait", a)
	}
}

func TestCoreTakeRefusedIsARead(t *testing.T) {
	c := newCore(t, "a")
	c.Next(at(0))
	c.Observed(at(0), metastore.Lease{}, false, nil)
	want(t, c.Next(at(0)), Write, mine(1))
	c.Wrote(at(5), other(1), fmt.Errorf("x: %w", metastore.ErrConflict))
	if c.Role() != Standby || c.Holder() != other(1) {
		t.Fatalf("after a refused take: %s, holder %+v; want standby seeing %+v", c.Role(), c.Holder(), other(1))
	}
	if a := c.Next(at(5)); a.Kind != Wait {
		t.Fatalf("after a refused take: %+v, want a wait (the lease is fresh)", a)
	}
}

func TestCoreTakeWithLostAnswer(t *testing.T) {
	for _, landed := range []bool{true, false} {
		t.Run(fmt.Sprint("landed=", landed), func(t *testing.T) {
			c := newCore(t, "a")
			c.Next(at(0))
			c.Observed(at(0), metastore.Lease{}, false, nil)
			want(t, c.Next(at(0)), Write, mine(1))
			c.Wrote(at(300), metastore.Lease{}, fmt.Errorf("x: %w", metastore.ErrUnavailable))
			if c.Role() != Standby {
				t.Fatalf("after a lost answer: %s, want standby until a read tells", c.Role())
			}
			if a := c.Next(at(300)); a.Kind != Wait {
				t.Fatalf("after a lost answer: %+v, want a wait of Retry", a)
			}
			want(t, c.Next(at(400)), Read, metastore.Lease{})
			if landed {
				c.Observed(at(400), mine(1), true, nil)
				// Valid from the first send (0 ms), not from the read.
				if !c.Leading(at(899)) || c.Leading(at(900)) {
					t.Fatalf("the landed take: leading at 899 ms %v, at 900 ms %v", c.Leading(at(899)), c.Leading(at(900)))
				}
				return
			}
			c.Observed(at(400), other(1), true, nil)
			if c.Role() != Standby {
				t.Fatalf("another's lease read after a lost answer: %s, want standby", c.Role())
			}
		})
	}
}

func TestCoreLeaderRenews(t *testing.T) {
	c := newCore(t, "a")
	lead(t, c, 0)
	if a := c.Next(at(100)); a.Kind != Wait || !a.Until.Equal(at(250)) {
		t.Fatalf("leader at 100 ms: %+v, want a wait until 250 ms", a)
	}
	want(t, c.Next(at(250)), Write, mine(2))
	c.Wrote(at(260), mine(2), nil)
	if !c.Leading(at(1149)) || c.Leading(at(1150)) {
		t.Fatal("a renewal sent at 250 ms is valid until 1150 ms")
	}
}

func TestCoreLeaderDeposedByAnotherWrite(t *testing.T) {
	c := newCore(t, "a")
	lead(t, c, 0)
	want(t, c.Next(at(250)), Write, mine(2))
	c.Wrote(at(260), other(2), fmt.Errorf("x: %w", metastore.ErrConflict))
	if c.Role() != Deposed || c.Leading(at(260)) {
		t.Fatalf("after a refused renewal: %s, leading %v", c.Role(), c.Leading(at(260)))
	}
	if a := c.Next(at(260)); a.Kind != Stop {
		t.Fatalf("deposed: %+v, want stop", a)
	}
}

func TestCoreLeaderRenewalLostAnswerIsResent(t *testing.T) {
	c := newCore(t, "a")
	lead(t, c, 0)
	want(t, c.Next(at(250)), Write, mine(2))
	c.Wrote(at(400), metastore.Lease{}, fmt.Errorf("x: %w", metastore.ErrUnavailable))
	want(t, c.Next(at(500)), Write, mine(2)) // the same write again
	// It had landed: the store refuses it with itself stored.
	c.Wrote(at(510), mine(2), fmt.Errorf("x: %w", metastore.ErrConflict))
	if c.Role() != Leader || !c.Leading(at(1149)) || c.Leading(at(1150)) {
		t.Fatalf("renewal landed on the first send (250 ms): %s, leading at 1149 ms %v, at 1150 ms %v",
			c.Role(), c.Leading(at(1149)), c.Leading(at(1150)))
	}
}

// TestCoreLeaderLapsesAndRecovers: a leader whose renewals fail stops
// leading when its validity ends but keeps renewing; a renewal that lands
// (nobody took the lease) makes it lead again, one refused deposes it.
func TestCoreLeaderLapsesAndRecovers(t *testing.T) {
	for _, taken := range []bool{false, true} {
		t.Run(fmt.Sprint("taken=", taken), func(t *testing.T) {
			c := newCore(t, "a")
			lead(t, c, 0)
			ms := 250
			for ; ms < 1000; ms += 50 {
				a := c.Next(at(ms))
				if a.Kind == Wait {
					continue
				}
				if a.Kind != Write || a.Lease != mine(2) {
					t.Fatalf("at %d ms: %+v, want the renewal to v2", ms, a)
				}
				c.Wrote(at(ms), metastore.Lease{}, fmt.Errorf("x: %w", metastore.ErrUnavailable))
			}
			if c.Leading(at(ms)) || c.Role() != Leader {
				t.Fatalf("at %d ms with no renewal: leading %v, %s; want not leading, still contending as leader", ms, c.Leading(at(ms)), c.Role())
			}
			a := c.Next(at(1100))
			if a.Kind != Write || a.Lease != mine(2) {
				t.Fatalf("lapsed at 1100 ms: %+v, want the renewal to v2 again", a)
			}
			if taken {
				c.Wrote(at(1110), other(2), fmt.Errorf("x: %w", metastore.ErrConflict))
				if a := c.Next(at(1110)); a.Kind != Stop || c.Role() != Deposed {
					t.Fatalf("renewal refused after the lapse: %+v, %s; want stop, deposed", a, c.Role())
				}
				return
			}
			c.Wrote(at(1110), mine(2), nil)
			// Valid from the first send of this write (250 ms): a write
			// resent after an unknown outcome keeps its first send time.
			if c.Leading(at(1150)) {
				t.Fatal("leading past the first send of the renewal + TTL - guard (1150 ms)")
			}
			want(t, c.Next(at(1150)), Write, mine(3))
			c.Wrote(at(1160), mine(3), nil)
			if !c.Leading(at(1160)) || !c.Leading(at(2049)) || c.Leading(at(2050)) {
				t.Fatal("a landed renewal sent at 1150 ms: want leading until 2050 ms")
			}
		})
	}
}

func TestCoreRelease(t *testing.T) {
	c := newCore(t, "a")
	lead(t, c, 0)
	c.Release()
	rel := metastore.Lease{Star: "star-1", Version: 2, TTLMs: 1000}
	want(t, c.Next(at(10)), Write, rel)
	c.Wrote(at(20), rel, nil)
	if c.Role() != Released || c.Leading(at(20)) {
		t.Fatalf("after release: %s, leading %v", c.Role(), c.Leading(at(20)))
	}
	if a := c.Next(at(20)); a.Kind != Stop {
		t.Fatalf("released: %+v, want stop", a)
	}
	// A standby asked to release just stops.
	s := newCore(t, "a")
	s.Release()
	if a := s.Next(at(0)); a.Kind != Stop || s.Role() != Released {
		t.Fatalf("standby released: %+v, %s", a, s.Role())
	}
}

func TestConfigValidate(t *testing.T) {
	ok := cfg("a")
	for name, c := range map[string]Config{
		"no holder":        {Star: "s", Addr: "x:1", TTL: time.Second},
		"no addr":          {Star: "s", Holder: "a", TTL: time.Second},
		"no star":          {Holder: "a", Addr: "x:1", TTL: time.Second},
		"ttl 0":            {Star: "s", Holder: "a", Addr: "x:1"},
		"ttl over the max": {Star: "s", Holder: "a", Addr: "x:1", TTL: 2 * time.Minute},
		"ttl not whole ms": {Star: "s", Holder: "a", Addr: "x:1", TTL: time.Second + 1},
		"renew at ttl/2":   {Star: "s", Holder: "a", Addr: "x:1", TTL: time.Second, Renew: 500 * time.Millisecond},
		"guard too large":  {Star: "s", Holder: "a", Addr: "x:1", TTL: time.Second, Guard: 800 * time.Millisecond},
	} {
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
	if err := ok.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
}
