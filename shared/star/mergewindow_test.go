package star

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// partsReader serves one stream's parts (refs or index entries, in seq
// order) as star.RecoverStream reads them.
type partsReader []metastore.Ref

func (p partsReader) LastRef(context.Context, string) (metastore.Ref, error) {
	if len(p) == 0 {
		return metastore.Ref{}, metastore.ErrNotFound
	}
	return p[len(p)-1], nil
}

func (p partsReader) RefsBefore(_ context.Context, _ string, before uint64, limit int) ([]metastore.Ref, error) {
	var out []metastore.Ref
	for i := len(p) - 1; i >= 0 && len(out) < limit; i-- {
		if p[i].FirstSeq < before {
			out = append(out, p[i])
		}
	}
	return out, nil
}

// merge is what settle does to consecutive parts of a stream (a run entry
// of passes, a merged run of runs, a flushed ref of runs: settle's pack,
// mergedOut.add and mergeMarks): one part over their seqs whose marks are
// metastore.TrimMarks of theirs, in seq order, and whose carried table is
// the newest of theirs (lastCarried).
func merge(parts []metastore.Ref) metastore.Ref {
	m := metastore.Ref{StreamID: parts[0].StreamID, FirstSeq: parts[0].FirstSeq, LastSeq: parts[len(parts)-1].LastSeq}
	var marks []metastore.ProducerMark
	for _, p := range parts {
		marks = append(marks, p.Producers...)
		if len(p.Carried) > 0 {
			m.Carried, m.CarriedBelow = p.Carried, p.CarriedBelow
		}
	}
	m.Producers = metastore.TrimMarks(marks)
	return m
}

type batchKey struct {
	p   format.ProducerID
	seq uint64
}

func window(t *testing.T, parts []metastore.Ref) map[batchKey]BatchMark {
	t.Helper()
	info, err := RecoverStream(t.Context(), partsReader(parts), sid(1), metastore.Standard, time.UnixMilli(0))
	if err != nil {
		t.Fatal(err)
	}
	out := map[batchKey]BatchMark{}
	for _, ps := range info.Producers {
		for _, b := range ps.Batches {
			out[batchKey{ps.ID, b.BatchSeq}] = b
		}
	}
	return out
}

// reference is the dedupe window a successor recovers, as docs/api.md
// defines it, computed naively: of the marks of the stream's last
// RecoverRefs parts, the latest MaxMarksPerProducer of each producer
// among the latest MaxRefProducerMarks.
func reference(parts []metastore.Ref) map[batchKey]BatchMark {
	var marks []metastore.ProducerMark
	for _, p := range parts[max(len(parts)-RecoverRefs, 0):] {
		marks = append(marks, p.Producers...)
	}
	out := map[batchKey]BatchMark{}
	per := map[format.ProducerID]int{}
	for i := len(marks) - 1; i >= 0 && len(out) < metastore.MaxRefProducerMarks; i-- {
		m := marks[i]
		if per[m.Producer] < metastore.MaxMarksPerProducer {
			per[m.Producer]++
			out[batchKey{m.Producer, m.BatchSeq}] = BatchMark{BatchSeq: m.BatchSeq, FirstSeq: m.FirstSeq, LastSeq: m.LastSeq}
		}
	}
	return out
}

// TestMergingNeverShrinksTheDedupeWindow (issue 30, exactly-once across
// merges): seeded random streams of idempotent batches (a few producers
// or many, one batch per part or many, parts at the per-part bound of
// 1,024 marks) whose parts settle merges in random consecutive groups,
// again and again. The window a successor recovers after a takeover
// (RecoverStream) is exactly the reference model's on the unmerged parts,
// and every batch in it is still in the window recovered from the merged
// parts, with the same seqs: a merge never forgets a batch a takeover
// would have remembered. (The suspected loss, "a merged entry keeps at
// most 8 marks per producer", does not happen: TrimMarks of a
// concatenation keeps what TrimMarks of the whole history keeps.)
func TestMergingNeverShrinksTheDedupeWindow(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 0xd3d0))
		producers := []int{1, 3, 40, 250}[rng.IntN(4)]
		perPart := []int{1, 5, 200}[rng.IntN(3)]
		var parts []metastore.Ref
		next := map[format.ProducerID]uint64{}
		seq := uint64(0)
		for range 1 + rng.IntN(60) {
			r := metastore.Ref{StreamID: sid(1).String(), FirstSeq: seq}
			var marks []metastore.ProducerMark
			for range 1 + rng.IntN(perPart) {
				p := pid(byte(1 + rng.IntN(producers)))
				n := uint64(1 + rng.IntN(3))
				marks = append(marks, metastore.ProducerMark{Producer: p, BatchSeq: next[p], FirstSeq: seq, LastSeq: seq + n - 1})
				next[p]++
				seq += n
			}
			r.LastSeq = seq - 1
			r.Producers = metastore.TrimMarks(marks) // the absorb bounds a part's marks so
			parts = append(parts, r)
		}
		want := window(t, parts)
		if ref := reference(parts); !maps(want, ref) {
			t.Fatalf("seed %d: the recovered window (%d batches) is not the reference model's (%d)", seed, len(want), len(ref))
		}
		mergeRounds(rng, parts, func(round int, merged []metastore.Ref) {
			got := window(t, merged)
			for k, b := range want {
				if g, ok := got[k]; !ok || g != b {
					t.Fatalf("seed %d, merge round %d (%d parts): producer %x batch %d (seqs %d-%d) was in the window before the merge, not after (%+v, %t)",
						seed, round, len(merged), k.p[:2], k.seq, b.FirstSeq, b.LastSeq, g, ok)
				}
			}
		})
	}
}

// mergeRounds merges parts as settle does, in random consecutive groups
// of 1 to 4 (merge), up to 5 rounds while more than one part is left,
// calling check with each round's parts.
func mergeRounds(rng *rand.Rand, parts []metastore.Ref, check func(round int, merged []metastore.Ref)) {
	merged := slices.Clone(parts)
	for round := 0; len(merged) > 1 && round < 5; round++ {
		var out []metastore.Ref
		for i := 0; i < len(merged); {
			n := 1 + rng.IntN(min(4, len(merged)-i))
			out = append(out, merge(merged[i:i+n]))
			i += n
		}
		merged = out
		check(round, merged)
	}
}

func maps(a, b map[batchKey]BatchMark) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
