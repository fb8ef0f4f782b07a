package read

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/metacount"
)

// seekStore is a metastore.Mem holding one stream's refs (of per records
// each, from seq first to below tail, timestamp 1000 + seq/3: non-decreasing
// with repeats), but for the refs in holes, behind a call counter.
func seekStore(t *testing.T, first, tail, per uint64, holes map[uint64]bool) (*metacount.Store, []metastore.Ref) {
	t.Helper()
	ctx := context.Background()
	m := metastore.NewMem()
	chain := metastore.ChainID{Star: "star-0", Class: metastore.Express}
	e := metastore.Epoch{Epoch: 1, State: metastore.EpochActive, K: 1, W: 1, Buckets: []string{"b"}, Window: 8}
	if err := m.MintEpoch(ctx, chain, 0, e); err != nil {
		t.Fatal(err)
	}
	h, err := m.BeginAbsorb(ctx, chain, metastore.Cursor{Epoch: 1}, metastore.Cursor{Epoch: 1, Slot: 1})
	if err != nil {
		t.Fatal(err)
	}
	var all, batch []metastore.Ref
	for s := first; s < tail; s += per {
		last := min(s+per, tail) - 1
		r := metastore.Ref{StreamID: seekID, FirstSeq: s, LastSeq: last, FirstTsMs: 1000 + int64(s/3), LastTsMs: 1000 + int64(last/3),
			Bytes: 1, Locations: []metastore.Location{{Key: "chains/star-0/1/0", Length: 1, FirstSeq: s}}}
		if holes[s] {
			continue
		}
		all = append(all, r)
		if batch = append(batch, r); len(batch) == 100 {
			if err := m.PutRefs(ctx, chain, h.Absorbing, batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := m.PutRefs(ctx, chain, h.Absorbing, batch); err != nil {
		t.Fatal(err)
	}
	return metacount.New(m), all
}

// naiveSeek is the model: one past the last ref ending before ts.
func naiveSeek(refs []metastore.Ref, tail uint64, ts int64) uint64 {
	lo := uint64(0)
	for _, r := range refs {
		if r.LastTsMs < ts {
			lo = r.LastSeq + 1
		}
	}
	return min(lo, tail)
}

// TestSeekTimestampLogarithmic: a read by timestamp over 5,000 refs finds
// its start in at most 1 + ceil(log2(tail)) metastore queries (walking the
// index took one per 100 refs: up to 50 here), and the start is the
// model's: one past the last ref that ends before the timestamp; also over
// a trimmed prefix and holes in the refs (a torn view), which walking the
// index answered with the hole's start (0 for any trimmed stream).
func TestSeekTimestampLogarithmic(t *testing.T) {
	const tail, per = 100_500, 20
	for _, c := range []struct {
		name  string
		first uint64
		holes map[uint64]bool
	}{
		{"whole", 0, nil},
		{"trimmed-with-holes", 500, map[uint64]bool{50_000: true, 50_020: true, 77_780: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, refs := seekStore(t, c.first, tail, per, c.holes)
			bound := 1 + bits.Len64(tail) // 1 + ceil(log2(tail)) for tail not a power of two
			r := rand.New(rand.NewPCG(3, 4))
			tss := []int64{0, 999, 1000, 1000 + int64(c.first)/3, 1000 + 50_000/3, 1000 + 50_022/3, 1000 + 77_790/3, 1000 + (tail-1)/3, 1000 + tail/3 + 5}
			for range 16 {
				tss = append(tss, 1000+r.Int64N(tail/3+10))
			}
			ctx := context.Background()
			rd := &Reader{Meta: q}
			st := metastore.Stream{Name: "s", ID: seekID}
			for _, ts := range tss {
				q.Reset()
				got, minTs, err := rd.resolve(ctx, st, format.StreamID{}, Start{Kind: FromTimestamp, TsMs: ts}, tail, 1<<62)
				if err != nil || minTs != ts {
					t.Fatalf("timestamp %d: filter %d, %v", ts, minTs, err)
				}
				if n := q.Snapshot().Of(metacount.QueryRefs); n > int64(bound) || q.Snapshot().Total() != n {
					t.Fatalf("timestamp %d: %d QueryRefs (%d calls in all), want at most %d", ts, n, q.Snapshot().Total(), bound)
				}
				if want := naiveSeek(refs, tail, ts); got != want {
					t.Fatalf("timestamp %d: start %d, want %d", ts, got, want)
				}
			}
		})
	}
}

// TestSeekTimestampSmallStream: a stream of fewer than seekPage refs is
// decided by one query, as walking the index did.
func TestSeekTimestampSmallStream(t *testing.T) {
	q, refs := seekStore(t, 0, 300, 10, nil)
	for _, ts := range []int64{0, 1000, 1050, 1099, 1100, 5000} {
		q.Reset()
		got, err := seekTimestamp(context.Background(), q, seekID, 300, ts)
		if err != nil {
			t.Fatal(err)
		}
		if want := naiveSeek(refs, 300, ts); got != want || q.Snapshot().Total() != 1 {
			t.Fatalf("timestamp %d: start %d (want %d) in %d calls (want 1)", ts, got, want, q.Snapshot().Total())
		}
	}
	// A metastore failure is the caller's error, with where.
	q2, _ := seekStore(t, 0, 300, 10, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := seekTimestamp(ctx, q2, seekID, 300, 1050); !errors.Is(err, context.Canceled) || !strings.Contains(fmt.Sprint(err), "query refs from 0") {
		t.Fatal("a cancelled query did not fail the seek")
	}
}

const seekID = "0123456789abcdef0123456789abcdef"

// shortPages cuts every QueryRefs page to at most n refs, as DynamoDB cuts
// a page at 1 MB whatever the limit.
type shortPages struct {
	refQuerier
	n int
}

func (s shortPages) QueryRefs(ctx context.Context, id string, from uint64, limit int) ([]metastore.Ref, error) {
	refs, err := s.refQuerier.QueryRefs(ctx, id, from, limit)
	return refs[:min(len(refs), s.n)], err
}

// TestSeekTimestampShortPages: a first page cut short (DynamoDB's 1 MB) is
// not the end of the refs: the seek still finds the model's start. Before
// the fix it stopped at the short page and started the read at its end
// (30 where the model says up to 290), reading and filtering everything
// in between.
func TestSeekTimestampShortPages(t *testing.T) {
	q, refs := seekStore(t, 0, 300, 10, nil)
	for _, ts := range []int64{0, 1000, 1050, 1099, 1100, 5000} {
		got, err := seekTimestamp(context.Background(), shortPages{q, 3}, seekID, 300, ts)
		if err != nil {
			t.Fatal(err)
		}
		if want := naiveSeek(refs, 300, ts); got != want {
			t.Fatalf("timestamp %d over short pages: start %d, want %d", ts, got, want)
		}
	}
}
