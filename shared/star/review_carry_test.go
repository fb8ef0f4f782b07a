package star

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// Invariant (ADR 0062: a carried table holds only released batches; the
// sim's checkCarried): a producer's batch disowned by an epoch's halt is
// never carried, nor answered, with seqs that now hold another batch.
// Batch 3 of pid(1) is in flight when the buckets turn read-only; after
// the recovery another batch is appended, pid(1) resends batch 3, and
// every carried mark of pid(1) in the flights after that names the seqs
// of the resend's ack (or of batches 0 to 2 as acknowledged).
func TestReviewDisownedBatchNeverCarried(t *testing.T) {
	var ro atomic.Bool
	h := readOnlyHarness(t, &ro)
	h.start()
	id := h.open(metastore.Express, 1)[0]
	ctx := context.Background()
	acks := map[uint64]Ack{}
	for k := range uint64(3) {
		a, err := h.star.Append(ctx, id, recs(1, nil2), AppendOptions{Producer: pid(1), BatchSeq: k})
		if err != nil {
			t.Fatal(err)
		}
		acks[k] = a
	}
	ro.Store(true)
	p, err := h.star.Submit(ctx, id, recs(2, nil2), AppendOptions{Producer: pid(1), BatchSeq: 3})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the halt", func() bool { return !h.star.Health().OK() })
	ro.Store(false)
	waitFor(t, "recovery once writable", func() bool { return h.star.Health().OK() })
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	a, err := p.Wait(wctx)
	cancel()
	t.Logf("batch 3 in flight at the halt: %+v, %v", a, err)
	if err == nil {
		acks[3] = a // it landed after all: then the resend must get this ack
	}
	other, err := h.star.Append(ctx, id, recs(1, nil2), AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	resend, err := h.star.Append(ctx, id, recs(2, nil2), AppendOptions{Producer: pid(1), BatchSeq: 3})
	if err != nil {
		t.Fatal(err)
	}
	if want, ok := acks[3]; ok && (resend.FirstSeq != want.FirstSeq || resend.LastSeq != want.LastSeq) {
		t.Fatalf("resend of a landed batch at %d-%d, its ack %d-%d", resend.FirstSeq, resend.LastSeq, want.FirstSeq, want.LastSeq)
	}
	if resend.FirstSeq <= other.LastSeq && resend.LastSeq >= other.FirstSeq {
		t.Fatalf("the resend is answered with %d-%d, which hold another batch (%d-%d)", resend.FirstSeq, resend.LastSeq, other.FirstSeq, other.LastSeq)
	}
	acks[3] = resend
	for range 2 * CarryEvery {
		if _, err := h.star.Append(ctx, id, recs(1, nil2), AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	carried := 0
	for epoch := uint64(1); epoch <= 3; epoch++ {
		for slot := uint64(0); ; slot++ {
			obj, err := h.mems[0].Get(ctx, format.SlotKey("star-0", epoch, slot), 0, -1)
			if err != nil {
				break
			}
			f, err := format.ParseFlight(obj)
			if err != nil {
				continue // a disowned or partial slot
			}
			for _, c := range f.Carried {
				for _, m := range c.Marks {
					if m.Producer != pid(1) {
						continue
					}
					carried++
					a, ok := acks[m.BatchSeq]
					if !ok || m.FirstSeq != a.FirstSeq || m.LastSeq != a.LastSeq {
						t.Fatalf("epoch %d slot %d carries pid(1) batch %d at %d-%d; acknowledged: %+v", epoch, slot, m.BatchSeq, m.FirstSeq, m.LastSeq, acks)
					}
				}
			}
		}
	}
	if carried == 0 {
		t.Fatal("no carried mark of pid(1): the check saw nothing")
	}
}
