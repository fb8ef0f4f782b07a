package star

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// frozen is a clock that never moves: no flush deadline ever passes, so
// only the size target and the idle cut can cut a flight.
type frozen struct{ t time.Time }

func (f frozen) Now() time.Time                     { return f.t }
func (frozen) After(time.Duration) <-chan time.Time { return nil }
func (frozen) Sleep(time.Duration)                  {}

// valve holds chain PUTs while shut.
type valve struct {
	objstore.Bucket
	mu   sync.Mutex
	shut chan struct{} // nil: open
}

func (v *valve) close() { v.mu.Lock(); v.shut = make(chan struct{}); v.mu.Unlock() }
func (v *valve) open()  { v.mu.Lock(); close(v.shut); v.shut = nil; v.mu.Unlock() }

func (v *valve) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	v.mu.Lock()
	ch := v.shut
	v.mu.Unlock()
	if ch != nil && strings.HasPrefix(key, "chains/") {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return v.Bucket.PutIfAbsent(ctx, key, body)
}

func idleCutHarness(t *testing.T, idle bool) (*harness, []*valve, format.StreamID) {
	var vs []*valve
	h := newHarness(t, metastore.Express, 3, 2, func(c *Config, _ *Options) {
		c.Clock = frozen{time.Unix(1_800_000_000, 0)}
		c.Express.IdleCut = idle
		c.Express.FlushDeadline = time.Hour
		for i, b := range c.Express.Buckets {
			v := &valve{Bucket: b}
			vs = append(vs, v)
			c.Express.Buckets[i] = v
		}
	})
	h.start()
	return h, vs, h.open(metastore.Express, 1)[0]
}

func poolLen(s *Star) int {
	l := s.loglets[metastore.Express]
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pool.n
}

func submit(t *testing.T, s *Star, id format.StreamID, body string) *Pending {
	t.Helper()
	p, err := s.Submit(context.Background(), id, []format.Record{{Body: []byte(body)}}, AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func waitAck(t *testing.T, p *Pending, want uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a, err := p.Wait(ctx)
	if err != nil || a.FirstSeq != want {
		t.Fatalf("ack %+v %v, want first seq %d", a, err, want)
	}
}

// With the idle cut, a batch that finds no flight in the air is cut at
// once (the clock never reaches the deadline); one that finds a flight in
// the air waits, and is cut when that flight releases.
func TestIdleCutCutsAnIdlePipelineAtOnce(t *testing.T) {
	h, vs, id := idleCutHarness(t, true)
	waitAck(t, submit(t, h.star, id, "a"), 0)

	for _, v := range vs {
		v.close()
	}
	b := submit(t, h.star, id, "b") // idle: cut, then held at the valves
	deadline := time.Now().Add(5 * time.Second)
	for poolLen(h.star) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a batch on an idle pipeline was not cut")
		}
		time.Sleep(time.Millisecond)
	}
	c := submit(t, h.star, id, "c") // b is in the air: c waits in the pool
	time.Sleep(50 * time.Millisecond)
	if n := poolLen(h.star); n != 1 {
		t.Fatalf("pool holds %d batches while a flight is in the air, want 1 (no idle cut)", n)
	}
	for _, v := range vs {
		v.open()
	}
	waitAck(t, b, 1)
	waitAck(t, c, 2) // cut when b released and the pipeline went idle
}

// Without it, only the deadline or the size target cuts: on a clock that
// never moves, a lone batch stays in the pool.
func TestWithoutIdleCutALoneBatchWaitsForTheDeadline(t *testing.T) {
	h, _, id := idleCutHarness(t, false)
	p := submit(t, h.star, id, "a")
	time.Sleep(50 * time.Millisecond)
	if n := poolLen(h.star); n != 1 {
		t.Fatalf("pool holds %d batches, want the lone batch still waiting", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := p.Wait(ctx); err == nil {
		t.Fatal("a lone batch was acked before its deadline without the idle cut")
	}
}
