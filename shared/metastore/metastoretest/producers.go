package metastoretest

import (
	"testing"

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
	wantErr(t, s.SwapRefs(ctx, []metastore.Ref{full, stale}, merged), metastore.ErrConflict, "swap with stale marks")
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
