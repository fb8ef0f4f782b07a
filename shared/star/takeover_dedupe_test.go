package star

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// TestSecondTakeoverKeepsTheOriginalAck checks the invariant exactly-once
// appends rely on across takeovers (ADR 0041, ADR 0062): a producer whose
// batch was committed, and whose ack was lost, gets the original ack when
// it resends the batch within its retry budget, whichever star it reaches.
//
// The schedule is the one found behind TestExactlyOnceThroughKill9's
// duplicate (ADR 0062): producer p's batch 0 (300 records, one `strand
// append` chunk) is committed on star 1, which dies before the ack. Star
// 2 recovers p from the stream's last refs, but p is backing off; star
// 2's other producers append in small flights, each absorbed into a ref
// of its own (the most parts per flight, as with an idle cut), many more
// than RecoverRefs of them, and star 2 dies too. Star 3 recovers the
// stream: p's mark is no longer in the own marks of the last RecoverRefs
// refs, but star 2 carried its dedupe table (p's batch among it) in its
// flights, so star 3 answers p's resend with the original ack instead of
// writing the chunk twice. Before the carried tables this failed.
func TestSecondTakeoverKeepsTheOriginalAck(t *testing.T) {
	ctx := context.Background()
	m := metastore.NewMem()
	put := putRefs(t, m)
	id := sid(5)
	p := pid(1)
	// Star 1's last flight: p's batch 0, seqs 0..299 (committed, ack lost).
	put([]metastore.Ref{{StreamID: id.String(), FirstSeq: 0, LastSeq: 299, LastTsMs: 1,
		Locations: []metastore.Location{{Key: "chains/x/0", Length: 1}},
		Producers: []metastore.ProducerMark{{Producer: p, BatchSeq: 0, FirstSeq: 0, LastSeq: 299}}}})

	// Star 2 recovers p and writes 3*RecoverRefs flights of other
	// producers' batches, one ref per flight.
	info, err := RecoverStream(ctx, m, id, metastore.Standard, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s2 := newHarness(t, metastore.Standard, 1, 1)
	s2.start()
	if err := s2.star.Open(info); err != nil {
		t.Fatal(err)
	}
	for k := range 3 * RecoverRefs {
		if _, err := s2.star.Append(ctx, id, recs(10, nil2), AppendOptions{Producer: pid(byte(2 + k%4)), BatchSeq: uint64(k / 4)}); err != nil {
			t.Fatal(err)
		}
	}
	refs, carrying := flightRefs(t, s2, "star-0", 1)
	if len(refs) < 3*RecoverRefs || carrying == 0 {
		t.Fatalf("star 2 wrote %d refs, %d of them carrying a table", len(refs), carrying)
	}
	put(refs)

	// Star 3 recovers the stream and opens it; p resends batch 0.
	info, err = RecoverStream(ctx, m, id, metastore.Standard, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s3 := newHarness(t, metastore.Standard, 1, 1)
	s3.start()
	if err := s3.star.Open(info); err != nil {
		t.Fatal(err)
	}
	a, err := s3.star.Append(ctx, id, recs(300, nil2), AppendOptions{Producer: p, BatchSeq: 0})
	if err != nil {
		t.Fatal(err)
	}
	if a.FirstSeq != 0 || a.LastSeq != 299 {
		t.Fatalf("p's resent batch 0 was written again at %d..%d, want the original ack 0..299 (a duplicate across the second takeover)", a.FirstSeq, a.LastSeq)
	}
	// Star 2's producers are remembered too: a resend of the last batch of
	// pid(2) gets its ack.
	last := 3*RecoverRefs - 4 // k of pid(2)'s last batch
	b, err := s3.star.Append(ctx, id, recs(10, nil2), AppendOptions{Producer: pid(2), BatchSeq: uint64(last / 4)})
	if err != nil || b.FirstSeq != uint64(300+10*last) {
		t.Fatalf("pid(2)'s resend: %+v, %v, want its original seqs from %d", b, err, 300+10*last)
	}
}

// flightRefs reads h's committed flights of epoch (bucket 0, from slot 0
// while slots exist) and absorbs each into refs of its own
// (absorb.BuildRefs); carrying counts the flights with a carried table.
func flightRefs(t *testing.T, h *harness, star string, epoch uint64) (refs []metastore.Ref, carrying int) {
	t.Helper()
	for slot := uint64(0); ; slot++ {
		key := format.SlotKey(star, epoch, slot)
		obj, err := h.mems[0].Get(context.Background(), key, 0, -1)
		if err != nil {
			return refs, carrying
		}
		f, err := format.ParseFlight(obj)
		if err != nil {
			t.Fatalf("slot %d: %v", slot, err)
		}
		if len(f.Carried) > 0 {
			carrying++
		}
		rs, err := absorb.BuildRefs([]chain.Slot{{Seq: slot, Key: key, Envelope: f.Envelope, Entries: f.Entries, Batches: f.Batches, Commands: f.Commands, Carried: f.Carried}})
		if err != nil {
			t.Fatal(fmt.Errorf("slot %d: %w", slot, err))
		}
		refs = append(refs, rs...)
	}
}
