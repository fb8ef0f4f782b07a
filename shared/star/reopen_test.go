package star

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/metacount"
)

// TestRecoverStreamFromRefs: the tail and the producers' latest batches
// come back from the last refs (what a successor reads after takeover).
func TestRecoverStreamFromRefs(t *testing.T) {
	ctx := context.Background()
	m := metastore.NewMem()
	put := putRefs(t, m)
	id := sid(3)
	p, q := pid(1), pid(2)
	var refs []metastore.Ref
	// 20 refs of 10 records; p writes batch k in ref k; q only in ref 2.
	for k := range 20 {
		r := metastore.Ref{StreamID: id.String(), FirstSeq: uint64(10 * k), LastSeq: uint64(10*k + 9), LastTsMs: int64(k),
			Locations: []metastore.Location{{Key: fmt.Sprintf("chains/x/%d", k), Length: 1}}}
		r.Producers = []metastore.ProducerMark{{Producer: p, BatchSeq: uint64(k), FirstSeq: uint64(10 * k), LastSeq: uint64(10*k + 4)}}
		if k == 2 {
			r.Producers = append(r.Producers, metastore.ProducerMark{Producer: q, BatchSeq: 7, FirstSeq: 25, LastSeq: 29})
		}
		if k >= 5 { // fenced in ref 5; the last ref's state is the current one
			r.Commands = &format.StreamCommands{FenceToken: fmt.Sprintf("w%d", k/10), TrimSeq: uint64(k)}
		}
		refs = append(refs, r)
	}
	put(refs)
	now := time.Unix(1_900_000_000, 0)
	info, err := RecoverStream(ctx, m, id, metastore.Standard, now)
	if err != nil {
		t.Fatal(err)
	}
	if info.Next != 200 || info.LastTsMs != 19 {
		t.Fatalf("tail %d/%d", info.Next, info.LastTsMs)
	}
	if info.Commands == nil || *info.Commands != (format.StreamCommands{FenceToken: "w1", TrimSeq: 19}) {
		t.Fatalf("command state %+v", info.Commands)
	}
	// q's only batch is in ref 2, beyond the last RecoverRefs (16) refs.
	if len(info.Producers) != 1 || info.Producers[0].ID != p || info.Producers[0].LastMs != now.UnixMilli() {
		t.Fatalf("producers %+v", info.Producers)
	}
	bs := info.Producers[0].Batches
	if len(bs) != metastore.MaxMarksPerProducer || bs[len(bs)-1] != (BatchMark{BatchSeq: 19, FirstSeq: 190, LastSeq: 194}) {
		t.Fatalf("p's batches %+v", bs)
	}
	// An unknown stream opens empty.
	if info, err := RecoverStream(ctx, m, sid(4), metastore.Standard, now); err != nil || info.Next != 0 || info.Producers != nil || info.Commands != nil {
		t.Fatal(info, err)
	}
}

// putRefs returns a function that puts refs into m as an absorb pass of a
// Standard chain would.
func putRefs(t *testing.T, m *metastore.Mem) func([]metastore.Ref) {
	t.Helper()
	ctx := context.Background()
	ch := metastore.ChainID{Star: "star-r", Class: metastore.Standard}
	if err := m.MintEpoch(ctx, ch, 0, metastore.Epoch{Epoch: 1, State: metastore.EpochActive, K: 1, W: 1, Buckets: []string{"b"}, Window: 1}); err != nil {
		t.Fatal(err)
	}
	h, err := m.BeginAbsorb(ctx, ch, metastore.Cursor{Epoch: 1}, metastore.Cursor{Epoch: 1, Slot: 100})
	if err != nil {
		t.Fatal(err)
	}
	return func(refs []metastore.Ref) {
		t.Helper()
		if err := m.PutRefs(ctx, ch, h.Absorbing, refs); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRecoverStreamReadsRefsInPages (ADR 0075): an open reads the refs
// before the last one in pages (metastore RefsBefore), not one Query a
// ref: 300 refs whose last carries a table that reaches back 200 refs
// cost LastRef and four pages of 15, 30, 60 and 120 refs (it was 200
// QueryRefs before), and q, whose only batch is in the ref the table
// reaches back to, is recovered; a table in the last ref reaching back
// 3 refs costs one page of 15. Refs of 64 KiB fill DynamoDB's 1 MB page
// after 16: the walk goes on page by page (the fake cuts pages as
// DynamoDB does) and still reaches q.
func TestRecoverStreamReadsRefsInPages(t *testing.T) {
	for _, tc := range []struct {
		big      bool
		back     int
		want     int64 // metastore calls
		wantRead int   // refs read, at most
	}{
		{false, 200, 5, 1 + 15 + 30 + 60 + 120},
		{false, 3, 2, 1 + 15},
		{true, 200, 2 + (200-16+14)/15, 300}, // pages of at least 1 MB minus a ref: 15 refs
	} {
		big, back := tc.big, tc.back
		t.Run(fmt.Sprintf("big=%v/back=%d", big, back), func(t *testing.T) {
			ctx := context.Background()
			m := metastore.NewMem()
			put := putRefs(t, m)
			id := sid(5)
			p, q := pid(1), pid(2)
			const n = 300
			var refs []metastore.Ref
			for k := range n {
				r := metastore.Ref{StreamID: id.String(), FirstSeq: uint64(10 * k), LastSeq: uint64(10*k + 9), LastTsMs: int64(k),
					Locations: []metastore.Location{{Key: fmt.Sprintf("chains/x/%d", k), Length: 1}}}
				if big {
					r.Locations[0].Key += strings.Repeat("k", metastore.MaxRefBytes-metastore.RefSize(r)-64)
				}
				r.Producers = []metastore.ProducerMark{{Producer: p, BatchSeq: uint64(k), FirstSeq: uint64(10 * k), LastSeq: uint64(10*k + 4)}}
				if k == n-back {
					r.Producers = append(r.Producers, metastore.ProducerMark{Producer: q, BatchSeq: 3, FirstSeq: uint64(10*k + 5), LastSeq: uint64(10*k + 9)})
				}
				if k == n-1 {
					j := n - back - 1 // p's batch in the ref before the table's tail
					r.Carried = []metastore.ProducerMark{{Producer: p, BatchSeq: uint64(j), FirstSeq: uint64(10 * j), LastSeq: uint64(10*j + 4)}}
					r.CarriedBelow = uint64(10 * (n - back)) // the tail when the table was cut
				}
				refs = append(refs, r)
			}
			for i := 0; i < n; i += 10 {
				put(refs[i : i+10])
			}
			c := metacount.New(m)
			cr := &countRefs{RefReader: c}
			info, err := RecoverStream(ctx, cr, id, metastore.Standard, time.Unix(1_900_000_000, 0))
			if err != nil {
				t.Fatal(err)
			}
			foundQ := false
			for _, ps := range info.Producers {
				foundQ = foundQ || ps.ID == q && len(ps.Batches) == 1 && ps.Batches[0].BatchSeq == 3
			}
			if info.Next != 10*n || len(info.Producers) != 2 || !foundQ {
				t.Fatalf("recovered tail %d, producers %+v; want %d and p, q (q's batch 3 in ref %d)", info.Next, info.Producers, 10*n, n-back)
			}
			got := c.Snapshot()
			calls := got.Of(metacount.LastRef) + got.Of(metacount.RefsBefore)
			if got.Total() != calls || calls > tc.want {
				t.Fatalf("an open of a stream of %d refs made %d metastore calls (%d LastRef, %d RefsBefore, %d QueryRefs); want at most %d", n, got.Total(), got.Of(metacount.LastRef), got.Of(metacount.RefsBefore), got.Of(metacount.QueryRefs), tc.want)
			}
			if cr.read > tc.wantRead {
				t.Fatalf("an open read %d refs, want at most %d", cr.read, tc.wantRead)
			}
		})
	}
}

// countRefs counts the refs a RefReader returns.
type countRefs struct {
	RefReader
	read int
}

func (c *countRefs) LastRef(ctx context.Context, id string) (metastore.Ref, error) {
	c.read++
	return c.RefReader.LastRef(ctx, id)
}

func (c *countRefs) RefsBefore(ctx context.Context, id string, before uint64, limit int) ([]metastore.Ref, error) {
	refs, err := c.RefReader.RefsBefore(ctx, id, before, limit)
	c.read += len(refs)
	return refs, err
}

// TestRecoverStreamSkipsCoveredParts: a page that holds a window part and
// the ref a flush wrote over it (the window read before the flush, the
// refs after) walks on through the ref, whichever comes first by seq; a
// real hole (a trim below) ends the walk.
func TestRecoverStreamSkipsCoveredParts(t *testing.T) {
	mark := func(k byte, first, last uint64) []metastore.ProducerMark {
		return []metastore.ProducerMark{{Producer: pid(k), BatchSeq: 0, FirstSeq: first, LastSeq: last}}
	}
	ref := func(first, last uint64, k byte) metastore.Ref {
		return metastore.Ref{StreamID: sid(1).String(), FirstSeq: first, LastSeq: last, Producers: mark(k, first, last)}
	}
	for _, tc := range []struct {
		name  string
		parts partsReader // in seq order, as RefsBefore sorts them
		want  int         // producers recovered
	}{
		// The skipped part's marks are the covering ref's (a flush keeps
		// them); here they differ, to show which was read.
		{"part then covering ref", partsReader{ref(70, 79, 4), ref(80, 100, 3), ref(90, 95, 2), ref(101, 110, 1)}, 3},
		{"same range twice", partsReader{ref(70, 79, 4), ref(80, 100, 3), ref(80, 100, 2), ref(101, 110, 1)}, 3},
		{"a hole", partsReader{ref(70, 79, 4), ref(90, 100, 3), ref(101, 110, 1)}, 2},
	} {
		info, err := RecoverStream(t.Context(), tc.parts, sid(1), metastore.Standard, time.UnixMilli(0))
		if err != nil {
			t.Fatal(err)
		}
		if info.Next != 111 || len(info.Producers) != tc.want {
			t.Fatalf("%s: tail %d, %d producers %+v; want 111 and %d", tc.name, info.Next, len(info.Producers), info.Producers, tc.want)
		}
	}
}
