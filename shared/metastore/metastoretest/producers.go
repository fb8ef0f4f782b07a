package metastoretest

import (
	"strings"
	"testing"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

func mark(p byte, batch, first, last uint64) metastore.ProducerMark {
	m := metastore.ProducerMark{BatchSeq: batch, FirstSeq: first, LastSeq: last}
	m.Producer[0], m.Producer[15] = p, 0xff
	return m
}

// testRefProducerMarks: a ref's producer marks round-trip exactly (up to
// MaxRefProducerMarks, the largest item the absorb writes), take part in
// SwapRefs' "still exactly as given" condition, and bad marks are refused.
func testRefProducerMarks(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	full := newRef(sid(1), 0, 99_999)
	for i := range metastore.MaxRefProducerMarks {
		full.Producers = append(full.Producers, mark(byte(i%251+1), uint64(i), uint64(i*10), uint64(i*10+9)))
	}
	small := newRef(sid(1), 100_000, 100_009)
	small.Producers = []metastore.ProducerMark{mark(7, 3, 100_000, 100_004), mark(7, 4, 100_005, 100_009)}
	// Its carried table (ADR 0062): acknowledged batches below it.
	small.Carried = []metastore.ProducerMark{mark(9, 0, 50, 59), mark(7, 2, 99_990, 99_999)}
	small.CarriedBelow = 100_000
	must(t, putRefs(t, s, []metastore.Ref{full, small}), "put refs with marks")
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{full, small}, "refs with marks")
	last, err := s.LastRef(ctx, sid(1))
	must(t, err, "last ref")
	wantRefs(t, []metastore.Ref{last}, []metastore.Ref{small}, "last ref with marks")

	// A swap whose old ref differs only in its marks changes nothing.
	stale := small
	stale.Producers = []metastore.ProducerMark{mark(7, 3, 100_000, 100_004)}
	merged := newRef(sid(1), 0, 100_009)
	merged.Producers = metastore.TrimMarks(append(append([]metastore.ProducerMark(nil), full.Producers...), small.Producers...))
	merged.Carried, merged.CarriedBelow = small.Carried, small.CarriedBelow
	wantErr(t, s.SwapRefs(ctx, []metastore.Ref{full, stale}, merged), metastore.ErrConflict, "swap with stale marks")
	staleCarried := small
	staleCarried.CarriedBelow = 99_999
	staleCarried.Carried = small.Carried[:1]
	wantErr(t, s.SwapRefs(ctx, []metastore.Ref{full, staleCarried}, merged), metastore.ErrConflict, "swap with a stale carried table")
	must(t, s.SwapRefs(ctx, []metastore.Ref{full, small}, merged), "swap carrying the marks")
	wantRefs(t, allRefs(t, s, sid(1)), []metastore.Ref{merged}, "merged ref keeps the marks")

	mod := func(f func(*metastore.Ref)) metastore.Ref {
		r := newRef(sid(2), 10, 19)
		f(&r)
		return r
	}
	bad := map[string]metastore.Ref{
		"mark outside the ref": mod(func(r *metastore.Ref) { r.Producers = []metastore.ProducerMark{mark(1, 0, 5, 12)} }),
		"mark without producer": mod(func(r *metastore.Ref) {
			r.Producers = []metastore.ProducerMark{{BatchSeq: 1, FirstSeq: 10, LastSeq: 10}}
		}),
		"carried mark above the ref": mod(func(r *metastore.Ref) {
			r.Carried, r.CarriedBelow = []metastore.ProducerMark{mark(1, 0, 15, 20)}, 20
		}),
		"carried mark at its tail": mod(func(r *metastore.Ref) {
			r.Carried, r.CarriedBelow = []metastore.ProducerMark{mark(1, 0, 5, 9)}, 9
		}),
		"carried tail without a table": mod(func(r *metastore.Ref) { r.CarriedBelow = 5 }),
		"carried marks out of order": mod(func(r *metastore.Ref) {
			r.Carried, r.CarriedBelow = []metastore.ProducerMark{mark(1, 1, 5, 6), mark(2, 0, 1, 2)}, 10
		}),
		"carried mark without producer": mod(func(r *metastore.Ref) {
			r.Carried, r.CarriedBelow = []metastore.ProducerMark{{BatchSeq: 1, FirstSeq: 1, LastSeq: 2}}, 10
		}),
		"too many carried of one producer": mod(func(r *metastore.Ref) {
			for i := range uint64(metastore.MaxMarksPerProducer + 1) {
				r.Carried = append(r.Carried, mark(1, i, i, i))
			}
			r.CarriedBelow = 10
		}),
		"too many marks": mod(func(r *metastore.Ref) {
			r.LastSeq = 1 << 20
			for i := 0; i <= metastore.MaxRefProducerMarks; i++ {
				r.Producers = append(r.Producers, mark(1, uint64(i), 10+uint64(i), 10+uint64(i)))
			}
		}),
	}
	for what, r := range bad {
		wantErr(t, putRefs(t, s, []metastore.Ref{r}), metastore.ErrInvalid, what)
		wantRefs(t, allRefs(t, s, sid(2)), nil, what+": refs after refused put")
	}
}

// testRefCommands: a ref's command state (fencing token, trim point)
// round-trips exactly, takes part in SwapRefs' "still exactly as given"
// condition, and a bad one is refused.
func testRefCommands(t *testing.T, s metastore.Store) {
	ctx := t.Context()
	plain := newRef(sid(3), 0, 9)
	fenced := newRef(sid(3), 10, 19)
	fenced.Commands = &format.StreamCommands{FenceToken: strings.Repeat("f", format.MaxFenceTokenBytes), TrimSeq: 7}
	must(t, putRefs(t, s, []metastore.Ref{plain, fenced}), "put refs with command state")
	wantRefs(t, allRefs(t, s, sid(3)), []metastore.Ref{plain, fenced}, "refs with command state")
	last, err := s.LastRef(ctx, sid(3))
	must(t, err, "last ref")
	if last.Commands == nil || *last.Commands != *fenced.Commands {
		t.Fatalf("last ref's command state %+v, want %+v", last.Commands, fenced.Commands)
	}
	stale := fenced
	stale.Commands = &format.StreamCommands{FenceToken: "other", TrimSeq: 7}
	merged := newRef(sid(3), 0, 19)
	merged.Commands = fenced.Commands
	wantErr(t, s.SwapRefs(ctx, []metastore.Ref{plain, stale}, merged), metastore.ErrConflict, "swap with a stale command state")
	must(t, s.SwapRefs(ctx, []metastore.Ref{plain, fenced}, merged), "swap carrying the command state")
	wantRefs(t, allRefs(t, s, sid(3)), []metastore.Ref{merged}, "merged ref keeps the command state")

	bad := newRef(sid(4), 0, 9)
	bad.Commands = &format.StreamCommands{FenceToken: strings.Repeat("x", format.MaxFenceTokenBytes+1)}
	wantErr(t, putRefs(t, s, []metastore.Ref{bad}), metastore.ErrInvalid, "fencing token over the bound")
	wantRefs(t, allRefs(t, s, sid(4)), nil, "refs after the refused put")
}
