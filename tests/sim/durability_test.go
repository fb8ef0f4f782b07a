package sim

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/star"
)

// TestDurabilityCheckerFails: the checker is not vacuous. After appends it
// passes; with one released slot's copies removed from two of three raw
// buckets (one left, W=2) Durable fails with ErrNotDurable; marked as
// damaged on purpose, the copies count again; a copy under another nonce
// does not count; with the last copy gone a successor's read fails.
func TestDurabilityCheckerFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, err := NewWorld(1, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		n, err := w.StartNode(ctx, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer n.Kill()
		for i := range 5 {
			if _, err := n.Star.Append(ctx, w.IDs[i%len(w.IDs)], []format.Record{{Body: []byte(fmt.Sprint("r", i))}}, star.AppendOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		rel := n.Star.Released(Chain)
		h, err := w.Meta.GetHead(ctx, Chain)
		if err != nil {
			t.Fatal(err)
		}
		d := NewDurability(w)
		if err := d.Durable(ctx, rel, h.Settled); err != nil {
			t.Fatalf("a healthy chain: %v", err)
		}
		succ, err := d.Successor(ctx, h, rel)
		if err != nil {
			t.Fatal(err)
		}
		recs, tail, err := ReadAll(ctx, w.Reader(succ, true), w.Streams[0])
		if err != nil || tail != 2 || len(recs) != 2 || string(recs[0].Body) != "r0" || string(recs[1].Body) != "r4" {
			t.Fatalf("successor read of %s: %d records %v, tail %d, %v", w.Streams[0].Name, len(recs), recs, tail, err)
		}

		slot := rel.Slot - 1
		key := format.SlotKey(StarID, rel.Epoch, slot)
		body, err := w.Mems[0].Get(ctx, key, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range []int{1, 2} {
			if err := w.Mems[i].Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
		}
		if err := NewDurability(w).Durable(ctx, rel, h.Settled); !errors.Is(err, ErrNotDurable) {
			t.Fatalf("one copy of W=2 left: %v, want ErrNotDurable", err)
		}
		d = NewDurability(w)
		d.MarkCorrupted(1, key)
		if err := d.Durable(ctx, rel, h.Settled); err != nil {
			t.Fatalf("a copy damaged on purpose counts: %v", err)
		}

		// Another writer's nonce at the key is not our copy.
		other := append([]byte(nil), body...)
		env, err := format.ParseEnvelope(other)
		if err != nil {
			t.Fatal(err)
		}
		env.Nonce[0] ^= 1
		env.Put(other)
		if err := w.Mems[1].PutIfAbsent(ctx, key, other); err != nil {
			t.Fatal(err)
		}
		if err := NewDurability(w).Durable(ctx, rel, h.Settled); !errors.Is(err, ErrNotDurable) {
			t.Fatalf("a copy under another nonce counted: %v", err)
		}

		for _, i := range []int{0, 1} {
			if err := w.Mems[i].Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
		}
		// The last slot (record r4 of stream 0) is absorbed: a successor
		// reads it through its ref, and finds no copy.
		succ, err = NewDurability(w).Successor(ctx, h, rel)
		if err != nil {
			t.Fatal(err)
		}
		if recs, _, err := ReadAll(ctx, w.Reader(succ, true), w.Streams[0]); err == nil {
			t.Fatalf("no copy of a released slot left, and the successor read %d records without an error", len(recs))
		}
	})
}
