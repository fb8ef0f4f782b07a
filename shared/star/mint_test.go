package star

import (
	"context"
	"sync/atomic"
	"testing"
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
