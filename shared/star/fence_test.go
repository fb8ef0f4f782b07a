package star

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/settle"
	"github.com/strandlog/strand/shared/trim"
)

// TestRecoveryFenceStartsAtTheCheckpoint: two flights reach W copies but
// their answers hang, so neither releases. The scheduled absorb sweep takes
// them anyway (committed slots may be absorbed before their acks), settle
// moves them to settled objects and trim deletes their chain slots. Then
// the first flight's commit deadline halts the epoch. The recovery fence
// must start at the checkpoint, not at the first unreleased slot: from
// there it would find the trimmed slots empty, poison them, cut at 0 and
// republish both batches into the next epoch with the seqs that refs
// already hold (two records per seq). Regression test for issue 13
// finding 7: the cut was 0 and epoch 2 held seqs 0 and 1 again.
func TestRecoveryFenceStartsAtTheCheckpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		answer := make(chan struct{})
		h := newHarness(t, metastore.Express, 3, 2, withChainFencer, func(c *Config, _ *Options) {
			c.Express.CommitDeadline = time.Second
			for i, b := range c.Express.Buckets {
				c.Express.Buckets[i] = &ghostBucket{Bucket: b, answer: answer}
			}
		})
		var once sync.Once
		h.star.onHalt = func(metastore.ChainID, uint64, error) { once.Do(func() { close(answer) }) }
		h.start()
		ctx := context.Background()
		id := h.open(metastore.Express, 1)[0]
		var pend []*Pending
		for _, body := range []string{"a", "b"} {
			p, err := h.star.Submit(ctx, id, recs(1, func(int) []byte { return []byte(body) }), AppendOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pend = append(pend, p)
			time.Sleep(10 * time.Millisecond) // past the flush deadline: cut, copies land, answers hang
			synctest.Wait()
		}
		sets := absorb.Sets{Express: chain.Set{Star: "star-0", Buckets: h.buckets, W: 2}}
		log := slog.New(slog.DiscardHandler)
		ch := metastore.ChainID{Star: "star-0", Class: metastore.Express}
		if _, err := (&absorb.Absorber{Meta: h.meta, Sets: sets, Log: log}).Run(ctx, ch, metastore.Cursor{}); err != nil {
			t.Fatal(err)
		}
		settled := objstore.NewMem("settled")
		if _, err := (&settle.Settler{Meta: h.meta, Sets: sets, Settled: settled, Log: log}).Run(ctx, ch); err != nil {
			t.Fatal(err)
		}
		if _, err := (&trim.Trimmer{Meta: h.meta, Sets: sets, Settled: settled, Log: log}).Run(ctx, ch); err != nil {
			t.Fatal(err)
		}
		head, err := h.meta.GetHead(ctx, ch)
		if err != nil || head.Checkpoint != (metastore.Cursor{Epoch: 1, Slot: 2}) {
			t.Fatalf("head after the sweep %+v %v, want checkpoint 1/2", head, err)
		}
		for _, m := range h.mems {
			for slot := uint64(0); slot < 2; slot++ {
				if _, err := m.Get(ctx, format.SlotKey("star-0", 1, slot), 0, -1); err == nil {
					t.Fatalf("slot %d is still in %s after trim", slot, m.Name())
				}
			}
		}
		for i, p := range pend {
			a, err := p.Wait(ctx)
			if err != nil || a.FirstSeq != uint64(i) {
				t.Fatalf("batch %d: %+v %v", i, a, err)
			}
		}
		rec, err := h.meta.GetEpoch(ctx, ch, 1)
		if err != nil || rec.State != metastore.EpochFenced || rec.Cut != 2 {
			t.Fatalf("epoch 1 %+v %v, want fenced at cut 2 (the checkpoint)", rec, err)
		}
		if got := h.chainRecords("star-0", 2)[id]; len(got) != 0 {
			t.Fatalf("epoch 2 republished %q: seqs the refs already hold", got)
		}
		h.star.Close()
	})
}
