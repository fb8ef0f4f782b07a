package metacount_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/metacount"
)

// ref is a ref of stream id with n transit locations (about 170 bytes
// each as an item, plus the ref's fixed 450 or so).
func ref(id string, first uint64, n int) metastore.Ref {
	r := metastore.Ref{StreamID: id, FirstSeq: first, LastSeq: first + uint64(n) - 1, Bytes: int64(n)}
	for i := 0; i < n; i++ {
		r.Locations = append(r.Locations, metastore.Location{Key: "star-0/00000000000000000001/0000000000000000007" + fmt.Sprint(i), Offset: int64(i), Length: 1, FirstSeq: first + uint64(i)})
	}
	return r
}

// TestUnits checks the bill of each call shape against DynamoDB's rules
// worked by hand: 2 WRU per KB per transactional item, 1 RRU per 4 KB of
// a strongly consistent read (a Query's items summed).
func TestUnits(t *testing.T) {
	ctx := context.Background()
	mem := metastore.NewMem()
	c := metacount.New(mem)
	chain := metastore.ChainID{Star: "star-0", Class: metastore.Express}
	id := strings.Repeat("a", 32)
	step := func(name string, want metacount.Units, f func() error) {
		t.Helper()
		before := c.Snapshot()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := c.Snapshot().Sub(before).Units; got != want {
			t.Errorf("%s: billed %+v, want %+v", name, got, want)
		}
	}
	step("CreateStream: META and listing items in a transaction", metacount.Units{Items: 2, WRU: 4}, func() error {
		_, err := c.CreateStream(ctx, metastore.Stream{Name: "s", ID: id, Class: metastore.Express, Star: "star-0", State: metastore.StreamActive})
		return err
	})
	step("MintEpoch: HEAD and EPOCH", metacount.Units{Items: 2, WRU: 4}, func() error {
		return c.MintEpoch(ctx, chain, 0, metastore.Epoch{Epoch: 1, State: metastore.EpochActive, K: 3, Buckets: []string{"b0", "b1", "b2"}, W: 2, Window: 8})
	})
	step("BeginAbsorb: one plain UpdateItem", metacount.Units{Items: 1, WRU: 1}, func() error {
		_, err := c.BeginAbsorb(ctx, chain, metastore.Cursor{Epoch: 1}, metastore.Cursor{Epoch: 1, Slot: 1})
		return err
	})
	small, big := ref(id, 0, 1), ref(id, 1, 8) // under 1 KB; between 1 and 2 KB
	if s, b := metastore.RefSize(small), metastore.RefSize(big); s > 1024 || b <= 1024 || b > 2048 {
		t.Fatalf("ref sizes %d and %d: the cases below need one under 1 KB and one in (1, 2] KB", s, b)
	}
	step("PutRefs: the HEAD check, a 1 KB ref and a 2 KB ref", metacount.Units{Items: 3, WRU: 2 + 2 + 4}, func() error {
		return c.PutRefs(ctx, chain, metastore.Cursor{Epoch: 1, Slot: 1}, []metastore.Ref{small, big})
	})
	step("GetHead: one strongly consistent read", metacount.Units{RRU: 1}, func() error {
		_, err := c.GetHead(ctx, chain)
		return err
	})
	step("QueryRefs: the ref before, then the refs (about 2.5 KB: 1 RRU)", metacount.Units{RRU: 2}, func() error {
		refs, err := c.QueryRefs(ctx, id, 0, 10)
		if len(refs) != 2 {
			return fmt.Errorf("got %d refs, want 2", len(refs))
		}
		return err
	})
	step("DeleteRefs: a delete per ref, billed on its size", metacount.Units{Items: 2, WRU: 2 + 4}, func() error {
		return c.DeleteRefs(ctx, []metastore.Ref{small, big})
	})
	// Regression: SettleRef (settle on the pass index) was not billed, so
	// a bench counting settle's writes missed every ref it wrote.
	step("SettleRef: the HEAD check, a 1 KB ref, the query and check of the ref before", metacount.Units{Items: 3, WRU: 2 + 2 + 2, RRU: 1}, func() error {
		return c.SettleRef(ctx, chain, metastore.Cursor{Epoch: 1}, nil, ref(id, 50, 1))
	})
	step("SettleRef merging: the HEAD check, the 2 KB ref put over the old, the query of the refs it adds, the ref before and the key past the old", metacount.Units{Items: 3, WRU: 2 + 4 + 2, RRU: 2}, func() error {
		merged := ref(id, 50, 8)
		merged.LastSeq = 57
		return c.SettleRef(ctx, chain, metastore.Cursor{Epoch: 1}, []metastore.Ref{ref(id, 50, 1)}, merged)
	})
	// 250 refs: three transactions (99 + 99 + 52 refs), each with a check.
	var many []metastore.Ref
	for i := range 250 {
		many = append(many, ref(id, 100+uint64(i), 1))
	}
	step("PutRefs of 250 small refs: three transactions", metacount.Units{Items: 253, WRU: 2 * 253}, func() error {
		return c.PutRefs(ctx, chain, metastore.Cursor{Epoch: 1, Slot: 1}, many)
	})
}
