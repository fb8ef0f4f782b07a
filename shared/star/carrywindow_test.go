package star

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// TestCarriedTablesKeepTheWindowAcrossTakeoversAndMerges (ADR 0062): a
// model of the star's carried tables on seeded random streams. Flights of
// idempotent batches (a few producers or many) are cut with up to P
// flights in flight (a table holds only the batches released at its
// cut, and records that tail), carried at each star's first flight and
// every CarryEvery-th, each flight absorbed into a part of its own; the
// star dies at random points and its successor's table is what
// RecoverStream recovers from the parts. Settle merges the parts in random
// consecutive groups (own marks by TrimMarks, the newest carried table
// kept). After every takeover and every merge round, the window a
// successor recovers is exactly the reference: each producer's latest
// MaxMarksPerProducer batches among the latest MaxRefProducerMarks of the
// stream's whole history, with their seqs. It holds however many parts
// ago a batch was committed: the window is a producer's retry budget and
// the 1,024-mark bound, not a count of parts.
func TestCarriedTablesKeepTheWindowAcrossTakeoversAndMerges(t *testing.T) {
	for seed := range uint64(150) {
		rng := rand.New(rand.NewPCG(seed, 0xca77))
		producers := []int{1, 3, 40, 250}[rng.IntN(4)]
		perFlight := []int{1, 3, 60}[rng.IntN(3)]
		inFlight := []int{0, 1, 8, 32}[rng.IntN(4)]
		var (
			flights  [][]metastore.ProducerMark // each flight's batches
			parts    []metastore.Ref
			history  []metastore.ProducerMark
			known    []metastore.ProducerMark // the live star's table
			released int                      // flights released
			since    int                      // the live star's flights since it carried
			carried  bool                     // the live star has carried
			next     = map[format.ProducerID]uint64{}
			seq      uint64
		)
		n := 40 + rng.IntN(160)
		for k := range n {
			if k > 0 && rng.IntN(25) == 0 { // a takeover: every flight so far committed
				info := recoverParts(t, parts)
				known = known[:0]
				for _, ps := range info.Producers {
					for _, b := range ps.Batches {
						known = append(known, metastore.ProducerMark{Producer: ps.ID, BatchSeq: b.BatchSeq, FirstSeq: b.FirstSeq, LastSeq: b.LastSeq})
					}
				}
				slices.SortFunc(known, func(a, b metastore.ProducerMark) int { return int(a.FirstSeq) - int(b.FirstSeq) })
				released, since, carried = k, 0, false
				checkWindow(t, seed, "takeover", parts, history)
			}
			// Releases in slot order: at the cut, at most inFlight of the
			// live star's flights are unreleased.
			for released < k && (released < k-inFlight || rng.IntN(2) == 0) {
				known = append(known, flights[released]...)
				released++
			}
			below := seq
			if released < k {
				below = flights[released][0].FirstSeq
			}
			first := seq
			var own []metastore.ProducerMark
			for range 1 + rng.IntN(perFlight) {
				p := pid(byte(1 + rng.IntN(producers)))
				c := uint64(1 + rng.IntN(3))
				own = append(own, metastore.ProducerMark{Producer: p, BatchSeq: next[p], FirstSeq: seq, LastSeq: seq + c - 1})
				next[p]++
				seq += c
			}
			flights = append(flights, own)
			history = append(history, own...)
			part := metastore.Ref{StreamID: sid(1).String(), FirstSeq: first, LastSeq: seq - 1, Producers: metastore.TrimMarks(own)}
			since++
			if !carried || since >= CarryEvery {
				var tab []metastore.ProducerMark
				for _, m := range known {
					if m.LastSeq < below {
						tab = append(tab, m)
					}
				}
				if tab = metastore.TrimMarks(tab); len(tab) > 0 {
					part.Carried, part.CarriedBelow = tab, below
					carried, since = true, 0
				}
			}
			if err := metastore.ValidateRef(withLocation(part)); err != nil {
				t.Fatalf("seed %d flight %d: %v", seed, k, err)
			}
			parts = append(parts, part)
		}
		checkWindow(t, seed, "end", parts, history)
		mergeRounds(rng, parts, func(_ int, merged []metastore.Ref) {
			checkWindow(t, seed, "merge", merged, history)
		})
	}
}

func withLocation(r metastore.Ref) metastore.Ref {
	r.Locations = []metastore.Location{{Key: "k", Length: 1}}
	return r
}

func recoverParts(t *testing.T, parts []metastore.Ref) StreamInfo {
	t.Helper()
	info, err := RecoverStream(t.Context(), partsReader(parts), sid(1), metastore.Standard, time.UnixMilli(0))
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// checkWindow: the window recovered from parts is exactly the reference
// on the history (TrimMarks of every batch, in seq order).
func checkWindow(t *testing.T, seed uint64, when string, parts []metastore.Ref, history []metastore.ProducerMark) {
	t.Helper()
	got := window(t, parts)
	want := map[batchKey]BatchMark{}
	for _, m := range metastore.TrimMarks(history) {
		want[batchKey{m.Producer, m.BatchSeq}] = BatchMark{BatchSeq: m.BatchSeq, FirstSeq: m.FirstSeq, LastSeq: m.LastSeq}
	}
	for k, b := range want {
		if g, ok := got[k]; !ok || g != b {
			t.Fatalf("seed %d, %s (%d parts): producer %x batch %d (seqs %d-%d) is in the reference window, recovered %+v, %t",
				seed, when, len(parts), k.p[:2], k.seq, b.FirstSeq, b.LastSeq, g, ok)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("seed %d, %s: recovered %d batches, the reference %d", seed, when, len(got), len(want))
	}
}
