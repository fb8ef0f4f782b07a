package star

import (
	"context"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"

	"github.com/strandlog/strand/shared/metastore"
)

// TestBacklogBudgetBlocksWithCauseAndResumes: with nothing absorbing, the
// backlog fills to its budget, publishes block (so acks stop), the stall is
// counted under its diagnosed cause, and an advancing checkpoint frees it.
func TestBacklogBudgetBlocksWithCauseAndResumes(t *testing.T) {
	for _, tc := range []struct {
		cause string
		slow  bool
	}{{StallAbsorbLagging, false}, {StallMetastoreSlow, true}} {
		t.Run(tc.cause, func(t *testing.T) {
			h := newHarness(t, metastore.Standard, 1, 1, func(c *Config, _ *Options) { c.BacklogFlights = 4 })
			h.star.SetAbsorbHealth(func(metastore.ChainID) AbsorbHealth { return AbsorbHealth{MetastoreSlow: tc.slow} })
			h.start()
			id := h.open(metastore.Standard, 1)[0]
			// Each append is its own flight (sequential producer, 2ms deadline).
			for i := 0; i < 4; i++ {
				if _, err := h.star.Append(context.Background(), id, recs(1, func(int) []byte { return []byte("x") }), AppendOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			l := h.star.loglets[metastore.Standard]
			p, err := h.star.Submit(context.Background(), id, recs(1, func(int) []byte { return []byte("y") }), AppendOptions{})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-p.Done():
				t.Fatal("a publish past the backlog budget was acked")
			case <-time.After(100 * time.Millisecond):
			}
			if n := l.m.stalls[tc.cause].Value(); n != 1 {
				t.Fatalf("stall counter %s = %d, want 1", tc.cause, n)
			}
			l.mu.Lock()
			if len(l.released) > 4 {
				t.Fatalf("backlog holds %d flights over its budget of 4", len(l.released))
			}
			l.mu.Unlock()
			h.star.Absorbed(l.chain, metastore.Cursor{Epoch: 1, Slot: 2})
			a, err := p.Wait(context.Background())
			if err != nil || a.FirstSeq != 4 {
				t.Fatal(a, err)
			}
		})
	}
}

// TestBacklogByteBudget: with --s3-chain-backlog-mib set, publishes block
// once the released and in-flight bytes reach it, even with flight tokens
// left, and resume as the checkpoint advances.
func TestBacklogByteBudget(t *testing.T) {
	h := newHarness(t, metastore.Standard, 1, 1, func(c *Config, _ *Options) { c.BacklogFlights = 1000; c.BacklogMiB = 1 })
	h.start()
	id := h.open(metastore.Standard, 1)[0]
	big := func() []format.Record { return []format.Record{{Body: make([]byte, 300<<10)}} }
	for i := 0; i < 4; i++ { // 4 x 300 KiB released: past 1 MiB
		if _, err := h.star.Append(context.Background(), id, big(), AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := h.star.Submit(context.Background(), id, big(), AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
		t.Fatal("a publish past the byte budget was acked")
	case <-time.After(100 * time.Millisecond):
	}
	l := h.star.loglets[metastore.Standard]
	if l.m.stalls[StallAbsorbLagging].Value() != 1 {
		t.Fatal("the byte-budget stall was not counted")
	}
	h.star.Absorbed(l.chain, metastore.Cursor{Epoch: 1, Slot: 4})
	if a, err := p.Wait(context.Background()); err != nil || a.FirstSeq != 4 {
		t.Fatal(a, err)
	}
}

// TestBacklogStallEpochSettling: after a halt's recovery the flight index
// still holds flights of the fenced epoch; a stall while the absorb has not
// stepped past it is diagnosed epoch_settling, and clears once the
// checkpoint reaches the new epoch. Regression test for issue 13 finding
// 6: the cause was only returned while halted, when the stall loop does not
// run, so it could never be reported (this stall was counted as
// absorb_lagging).
func TestBacklogStallEpochSettling(t *testing.T) {
	h := newHarness(t, metastore.Express, 3, 2, withChainFencer, func(c *Config, _ *Options) { c.BacklogFlights = 4 })
	h.start()
	id := h.open(metastore.Express, 1)[0]
	l := h.star.loglets[metastore.Express]
	// A foreign occupant at epoch 1 slot 2 halts the epoch there; the star
	// recovers into epoch 2.
	var foreign format.Nonce
	copy(foreign[:], "someone-else-16b")
	for _, m := range h.mems[:2] {
		if err := m.PutIfAbsent(context.Background(), format.SlotKey("star-0", 1, 2), format.Poison(1, 2, foreign).Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 4; i++ { // slots 1/0, 1/1, then 2/0, 2/1 (after the halt at 1/2)
		if _, err := h.star.Append(context.Background(), id, recs(1, func(int) []byte { return []byte("x") }), AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	l.mu.Lock()
	epoch, oldest := l.epoch, l.released[0].epoch
	l.mu.Unlock()
	if epoch != 2 || oldest != 1 {
		t.Fatalf("epoch %d, oldest unabsorbed flight of epoch %d: the scenario needs a recovery", epoch, oldest)
	}
	p, err := h.star.Submit(context.Background(), id, recs(1, func(int) []byte { return []byte("y") }), AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stall", func() bool {
		return l.m.stalls[StallEpochSettling].Value()+l.m.stalls[StallAbsorbLagging].Value() > 0
	})
	if n := l.m.stalls[StallEpochSettling].Value(); n != 1 {
		t.Fatalf("epoch_settling stalls = %d (absorb_lagging %d), want 1", n, l.m.stalls[StallAbsorbLagging].Value())
	}
	h.star.Absorbed(l.chain, metastore.Cursor{Epoch: 2, Slot: 1})
	if a, err := p.Wait(context.Background()); err != nil || a.FirstSeq != 4 {
		t.Fatal(a, err)
	}
}
