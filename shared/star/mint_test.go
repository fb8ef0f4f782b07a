package star

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// lostMint applies the next n mints but loses their answers.
type lostMint struct {
	metastore.Store
	n atomic.Int32
}

func (m *lostMint) MintEpoch(ctx context.Context, c metastore.ChainID, prev uint64, e metastore.Epoch) error {
	err := m.Store.MintEpoch(ctx, c, prev, e)
	if err == nil && m.n.Add(-1) >= 0 {
		return metastore.ErrUnavailable
	}
	return err
}

// TestLostMintAnswerIsNotASuccessor: a mint that lands but whose answer is
// lost, at start and during halt recovery, is recognised by its nonce: the
// star leads (start) and recovers (halt) instead of shedding leadership.
func TestLostMintAnswerIsNotASuccessor(t *testing.T) {
	h := newHarness(t, metastore.Express, 3, 2, withChainFencer)
	lm := &lostMint{Store: h.meta}
	lm.n.Store(2)
	h.star.meta = lm
	h.start()
	l := h.star.loglets[metastore.Express]
	if l.epoch != 1 {
		t.Fatalf("started at epoch %d", l.epoch)
	}
	// Poison a slot ahead so the writer halts and recovers (second mint).
	var foreign format.Nonce
	copy(foreign[:], "someone-else-16b")
	for _, m := range h.mems[:2] {
		m.PutIfAbsent(context.Background(), format.SlotKey("star-0", 1, 2), format.Poison(1, 2, foreign).Bytes())
	}
	id := h.open(metastore.Express, 1)[0]
	for i := 0; i < 6; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := h.star.Append(ctx, id, recs(1, func(int) []byte { return []byte("x") }), AppendOptions{})
		cancel()
		if err != nil {
			t.Fatalf("append %d: %v (a lost mint answer was taken for a successor)", i, err)
		}
	}
	l.mu.Lock()
	epoch, deposed := l.epoch, l.deposed
	l.mu.Unlock()
	if epoch != 2 || deposed != nil || lm.n.Load() != 0 {
		t.Fatalf("epoch %d deposed %v lost answers left %d", epoch, deposed, lm.n.Load())
	}
}

// rivalMints: before each of the next n mints, an old leader that is
// deposed but alive mints the same epoch first (its in-process recovery
// racing our takeover), so ours loses the CAS.
type rivalMints struct {
	metastore.Store
	n atomic.Int32
}

func (m *rivalMints) MintEpoch(ctx context.Context, c metastore.ChainID, prev uint64, e metastore.Epoch) error {
	if m.n.Add(-1) >= 0 {
		r := e
		copy(r.Nonce[:], "old-leader-alive")
		if err := m.Store.MintEpoch(ctx, c, prev, r); err != nil {
			return err
		}
	}
	return m.Store.MintEpoch(ctx, c, prev, e)
}

// TestTakeoverKeepsTryingWhileTheOldLeaderMints: a successor that loses
// its mint to the old leader five times in a row takes over again each
// time, with backoff on the (virtual) clock, and leads in the end. The
// rounds' waits are bounded. Regression test for issue 13 finding 8: Start
// gave up after three lost mints with ErrNotLeader.
func TestTakeoverKeepsTryingWhileTheOldLeaderMints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, metastore.Express, 3, 2, withChainFencer)
		rm := &rivalMints{Store: h.meta}
		rm.n.Store(5)
		h.star.meta = rm
		start := time.Now()
		if err := h.star.Start(context.Background()); err != nil {
			t.Fatalf("successor gave up: %v", err)
		}
		defer h.star.Close()
		waited := time.Since(start) // virtual time: the backoffs' sum
		l := h.star.loglets[metastore.Express]
		if l.epoch != 6 {
			t.Fatalf("leads epoch %d, want 6 (after five lost mints)", l.epoch)
		}
		for e := uint64(1); e <= 5; e++ {
			rec, err := h.meta.GetEpoch(context.Background(), l.chain, e)
			if err != nil || rec.State != metastore.EpochFenced {
				t.Fatalf("the old leader's epoch %d: %+v %v, want fenced by the successor", e, rec, err)
			}
		}
		// 50+100+200+400+800 ms, plus at most half again in jitter.
		if waited < 1550*time.Millisecond || waited > 2325*time.Millisecond {
			t.Fatalf("backoff over five lost mints took %s, want between 1.55 s and 2.325 s", waited)
		}
	})
}
