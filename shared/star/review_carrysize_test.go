package star

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// Invariant (docs/operations.md, "Memory"): a flight is at most the
// target flight size plus one batch (at most 1 MiB) plus one carried table
// (at most 40,976 bytes), which bounds a star's memory in flight and in the
// flight index. Carried tables (ADR 0062) were rendered into the flight
// outside the cut's byte count, so a flight holding many streams whose
// tables are full was many times the target: here 100 streams, each
// opened with 1,024 recovered marks, append one small record each and
// their first flights after the open carry 100 x 40 KiB. Before the cut
// counted the tables (carry.go, admitted) the largest flight was 4,108,280
// bytes against the 64 KiB target (a review of session 10 found it); now
// the flights hold two streams each (82,244 bytes) and every stream still
// carries its table in its first flight.
func TestReviewCarriedTablesKeepFlightsNearTheTarget(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, metastore.Standard, 1, 1, func(c *Config, _ *Options) {
		c.Standard.FlushDeadline = 200 * time.Millisecond // one flight for every stream's append
	})
	h.start()
	const streams, producers = 100, metastore.MaxRefProducerMarks / metastore.MaxMarksPerProducer
	now := time.Now().UnixMilli()
	for s := range streams {
		var ps []ProducerState
		seq := uint64(0)
		for p := range producers {
			var id format.ProducerID
			id[0], id[1], id[15] = byte(p>>8), byte(p), 1
			st := ProducerState{ID: id, LastMs: now}
			for b := range metastore.MaxMarksPerProducer {
				st.Batches = append(st.Batches, BatchMark{BatchSeq: uint64(b), FirstSeq: seq, LastSeq: seq})
				seq++
			}
			ps = append(ps, st)
		}
		if err := h.star.Open(StreamInfo{ID: sid(100 + s), Class: metastore.Standard, Next: seq, Producers: ps}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := h.star.Append(ctx, sid(100+s), recs(1, nil2), AppendOptions{}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	target := 64 << 10
	largest, carriers := 0, 0
	for slot := uint64(0); ; slot++ {
		obj, err := h.mems[0].Get(ctx, format.SlotKey("star-0", 1, slot), 0, -1)
		if err != nil {
			break
		}
		f, err := format.ParseFlight(obj)
		if err != nil {
			t.Fatalf("slot %d: %v", slot, err)
		}
		carriers += len(f.Carried)
		largest = max(largest, len(obj))
	}
	if carriers != streams {
		t.Fatalf("%d carried tables, want one per stream (%d)", carriers, streams)
	}
	// The batches are one small record each: the bound is the target, one
	// full table, and 4 KiB for that batch and the flight's framing
	// (headers, batch and carried tables' counts, footer).
	if bound := target + format.CarriedEntrySize(format.MaxCarriedMarks) + 4<<10; largest > bound {
		t.Fatalf("the largest flight is %d bytes: over the %d-byte target plus one carried table plus one small batch (%d)", largest, target, bound)
	}
}

// fixedExtras is a cutSizer giving each batch the extra bytes set for it,
// recording what it gave.
type fixedExtras struct {
	extra map[*batch]int
	given int
}

func (x *fixedExtras) admitted(b *batch) int {
	n := x.extra[b]
	x.given += n
	return n
}

// TestPoolCutCountsTheExtras: the cut counts the extra bytes each batch
// brings (its stream's carried table) toward the flight's size, so a
// flight is at most max(target, its first batch) plus one batch's extra,
// in the worst case too: every batch brings a full table (40,976 bytes)
// and batches of up to 1 MiB, over several tenants (seeded; the seed is
// printed on failure).
func TestPoolCutCountsTheExtras(t *testing.T) {
	const seed = 62
	rng := rand.New(rand.NewPCG(seed, 0))
	maxTable := format.CarriedEntrySize(format.MaxCarriedMarks)
	for _, target := range []int{64 << 10, 1 << 20, 8 << 20} {
		p := newPool(false)
		x := &fixedExtras{extra: map[*batch]int{}}
		pooled, extras := 0, 0
		for i := range 2000 {
			size := 1 + rng.IntN(4<<10)
			if rng.IntN(50) == 0 {
				size = 1 << 20
			}
			b := fairBatch(&stream{id: sid(i % 300)}, string(rune('a'+i%5)), size, i)
			x.extra[b] = maxTable
			if rng.IntN(4) == 0 {
				x.extra[b] = rng.IntN(maxTable + 1)
			}
			p.push(b)
			pooled += size
			extras += x.extra[b]
		}
		cut := 0
		for p.n > 0 {
			given := x.given
			out, bytes := p.cut(target, x)
			if len(out) == 0 {
				t.Fatalf("seed %d, target %d: an empty flight with %d batches pooled", seed, target, p.n)
			}
			records := 0
			for _, b := range out {
				records += b.size
			}
			if bytes != records+x.given-given {
				t.Fatalf("seed %d, target %d: a flight of %d bytes, want its records (%d) plus the extras given (%d)", seed, target, bytes, records, x.given-given)
			}
			if bound := max(target, out[0].size) + maxTable; bytes > bound {
				t.Fatalf("seed %d, target %d: a flight of %d bytes (%d batches), over max(target, first batch) + one table = %d", seed, target, bytes, len(out), bound)
			}
			cut += records
		}
		if cut != pooled || x.given != extras {
			t.Fatalf("seed %d, target %d: cut %d of %d bytes, %d of %d extras", seed, target, cut, pooled, x.given, extras)
		}
	}
}
