package dynamo

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/strandlog/strand/shared/metastore"
)

// TestReview3LandedWritesOfMovesAndSettle (ADR 0070 write ids, attack, on
// the emulator): the writes of the newest protocols, a stream move (ADR
// 0065), one settle commit (ADR 0063's MoveCursors) and a settled ref
// with its neighbours' condition (SettleApart, with and without refs it
// replaces), each landing and then retried by the SDK after its answer
// was lost (moto ignores ClientRequestToken, so the retry's conditions
// fail on the write's own effect): each reports success and stores the
// write once. TestLandedWriteRetried covers the older writes.
func TestReview3LandedWritesOfMovesAndSettle(t *testing.T) {
	ctx := context.Background()
	e1, e2 := metastore.Cursor{Epoch: 1}, metastore.Cursor{Epoch: 1, Slot: 3}
	str := metastore.Stream{Name: "s", ID: sid(1), Class: metastore.Express, Star: "star-0", State: metastore.StreamActive}
	// absorbed mints epoch 1 and absorbs a pass to e2 (the checkpoint).
	absorbed := func(st *Store) error {
		if err := st.MintEpoch(ctx, chain, 0, epoch(1)); err != nil {
			return err
		}
		if _, err := st.BeginAbsorb(ctx, chain, e1, e2); err != nil {
			return err
		}
		return st.AdvanceCursor(ctx, chain, metastore.Checkpoint, e1, e2)
	}
	// settledTo is absorbed with the settled cursor at e2.
	settledTo := func(st *Store) error {
		if err := absorbed(st); err != nil {
			return err
		}
		return st.AdvanceCursor(ctx, chain, metastore.Settled, e1, e2)
	}
	settled := func(first, last uint64) metastore.Ref {
		r := ref(sid(1), first, last)
		r.Locations = []metastore.Location{{Settled: true, Key: fmt.Sprintf("streams/%s/%d-%d", sid(1), first, last), Offset: 64, Length: 10, FirstSeq: first}}
		return r
	}
	wantRefs := func(st *Store, want ...[2]uint64) error {
		refs, err := st.QueryRefs(ctx, sid(1), 0, 100)
		if err != nil {
			return err
		}
		if len(refs) != len(want) {
			return fmt.Errorf("%d refs, want %d", len(refs), len(want))
		}
		for i, r := range refs {
			if r.FirstSeq != want[i][0] || r.LastSeq != want[i][1] {
				return fmt.Errorf("ref %d is %d-%d, want %d-%d", i, r.FirstSeq, r.LastSeq, want[i][0], want[i][1])
			}
		}
		return nil
	}
	runLanded(t, []landedCase{
		{"MoveStream", "TransactWriteItems", func(st *Store) error {
			_, err := st.CreateStream(ctx, str)
			return err
		}, func(st *Store) error {
			return st.MoveStream(ctx, "s", str.ID, "star-0", "star-1")
		}, func(st *Store) error {
			got, err := st.GetStream(ctx, "s")
			if err == nil && (got.Star != "star-1" || got.From != "star-0") {
				err = fmt.Errorf("stream %+v, want led by star-1 from star-0", got)
			}
			return err
		}},
		{"MoveCursors (one settle commit)", "TransactWriteItems", absorbed, func(st *Store) error {
			return st.MoveCursors(ctx, chain, []metastore.CursorMove{
				{Kind: metastore.Settled, From: e1, To: e2}, {Kind: metastore.Checkpoint, From: e2, To: e2}})
		}, func(st *Store) error {
			return wantHead(st, chain, func(h metastore.Head) bool { return h.Settled == e2 })
		}},
		{"SettleRef, a new ref after another (its neighbour's condition)", "TransactWriteItems", func(st *Store) error {
			if err := settledTo(st); err != nil {
				return err
			}
			return st.SettleRef(ctx, chain, e2, nil, settled(0, 4))
		}, func(st *Store) error {
			return st.SettleRef(ctx, chain, e2, nil, settled(5, 9))
		}, func(st *Store) error { return wantRefs(st, [2]uint64{0, 4}, [2]uint64{5, 9}) }},
		{"SettleRef, two refs extended (the key past them absent)", "TransactWriteItems", func(st *Store) error {
			if err := settledTo(st); err != nil {
				return err
			}
			if err := st.SettleRef(ctx, chain, e2, nil, settled(0, 4)); err != nil {
				return err
			}
			return st.SettleRef(ctx, chain, e2, nil, settled(5, 9))
		}, func(st *Store) error {
			return st.SettleRef(ctx, chain, e2, []metastore.Ref{settled(0, 4), settled(5, 9)}, settled(0, 14))
		}, func(st *Store) error { return wantRefs(st, [2]uint64{0, 14}) }},
		{"RaiseFloor", "TransactWriteItems", func(st *Store) error {
			_, err := st.CreateStream(ctx, str)
			return err
		}, func(st *Store) error {
			return st.RaiseFloor(ctx, "s", str.ID, 7)
		}, func(st *Store) error {
			got, err := st.GetStream(ctx, "s")
			if err == nil && got.Floor != 7 {
				err = errors.New("the floor is not 7")
			}
			return err
		}},
	})
}
