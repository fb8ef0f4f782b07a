package chain

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/objstore"
)

func TestWalk(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, 3, 2)
	for s := range uint64(5) {
		r.put(t, 2, s, flightBytes(2, s), 0, 1, 2)
	}
	// Slot 1: bucket 0's copy is bit-flipped in the envelope at rest.
	bad := flightBytes(2, 1)
	bad[9] ^= 0x10
	r.mems[0].Delete(ctx, format.SlotKey("star-0", 2, 1))
	r.put(t, 2, 1, bad, 0)
	// Slot 2: bucket 0 and 1 have a corrupt footer (envelope intact).
	badFoot := flightBytes(2, 2)
	badFoot[len(badFoot)-6] ^= 1
	for _, i := range []int{0, 1} {
		r.mems[i].Delete(ctx, format.SlotKey("star-0", 2, 2))
		r.put(t, 2, 2, badFoot, i)
	}
	// Slot 3: bucket 0 lacks the copy, and bucket 1 holds a poison.
	r.mems[0].Delete(ctx, format.SlotKey("star-0", 2, 3))
	r.mems[1].Delete(ctx, format.SlotKey("star-0", 2, 3))
	r.put(t, 2, 3, format.Poison(2, 3, fencerNonce).Bytes(), 1)

	var got []string
	err := r.set.Walk(ctx, 2, 1, 5, func(s Slot) error {
		if len(s.Entries) != 1 || s.Entries[0].FirstSeq != s.Seq*10 || s.Envelope.Slot != s.Seq || s.Key != format.SlotKey("star-0", 2, s.Seq) {
			t.Errorf("slot %d: %+v", s.Seq, s)
		}
		got = append(got, fmt.Sprintf("%d@%d", s.Seq, s.Bucket))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "[1@1 2@2 3@2 4@0]"; fmt.Sprint(got) != want {
		t.Errorf("walk %v, want %s", got, want)
	}
	// Point lookups only: never a listing.
	for _, inj := range r.injs {
		if inj.Calls(objstore.OpList) != 0 {
			t.Error("walk listed")
		}
	}

	// An unavailable bucket falls through; fn's error stops the walk.
	r.injs[0].SetDown(true)
	stop := errors.New("stop")
	n := 0
	err = r.set.Walk(ctx, 2, 0, 5, func(s Slot) error {
		n++
		if s.Bucket == 0 {
			t.Errorf("read from a down bucket")
		}
		if s.Seq == 3 {
			return stop
		}
		return nil
	})
	if err != stop || n != 4 {
		t.Errorf("walk stopped with %v after %d slots", err, n)
	}
	// from == cut: nothing; from > cut: invalid.
	if err := r.set.Walk(ctx, 2, 5, 5, func(Slot) error { t.Error("called"); return nil }); err != nil {
		t.Error(err)
	}
	if err := r.set.Walk(ctx, 2, 6, 5, func(Slot) error { return nil }); !errors.Is(err, ErrInvalid) {
		t.Error(err)
	}
}

func TestWalkLost(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, 3, 2)
	r.put(t, 2, 0, flightBytes(2, 0), 0, 1)
	r.put(t, 2, 2, flightBytes(2, 2), 1, 2)
	// Slot 1 has no flight anywhere (one poison): loud, immediate, no retry.
	r.put(t, 2, 1, format.Poison(2, 1, fencerNonce).Bytes(), 0)
	var seen []uint64
	err := r.set.Walk(ctx, 2, 0, 3, func(s Slot) error { seen = append(seen, s.Seq); return nil })
	if !errors.Is(err, ErrLost) || len(seen) != 1 || r.clk.waits != 0 {
		t.Fatalf("err %v, seen %v, waits %d", err, seen, r.clk.waits)
	}
	t.Logf("error: %v", err)

	// Only corrupt or unavailable copies: retried until RetryFor, then ErrLost.
	r = newRig(t, 3, 2)
	bad := flightBytes(2, 0)
	bad[30] ^= 4
	r.put(t, 2, 0, bad, 0)
	r.injs[1].SetDown(true)
	r.injs[2].SetDown(true)
	err = r.set.Walk(ctx, 2, 0, 1, func(Slot) error { return nil })
	if !errors.Is(err, ErrLost) || !errors.Is(err, ErrDeadline) || r.clk.waits == 0 {
		t.Fatalf("err %v after %d waits", err, r.clk.waits)
	}

	// The same with the bucket coming back: found.
	r = newRig(t, 3, 2)
	r.put(t, 2, 0, flightBytes(2, 0), 1, 2)
	r.injs[1].SetDown(true)
	r.injs[2].SetDown(true)
	r.clk.onAfter = func(n int) {
		if n == 2 {
			r.injs[2].SetDown(false)
		}
	}
	err = r.set.Walk(ctx, 2, 0, 1, func(s Slot) error {
		if s.Bucket != 2 {
			t.Errorf("bucket %d", s.Bucket)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestReadRange(t *testing.T) {
	for _, view := range []bool{false, true} {
		t.Run(fmt.Sprintf("view=%v", view), func(t *testing.T) {
			ctx := context.Background()
			r := newRig(t, 3, 2)
			read := r.set.ReadRange
			if view {
				read = r.set.ViewRange // the same answers, the bytes maybe the bucket's
			}
			obj := flightBytes(4, 9)
			r.put(t, 4, 9, obj, 0, 1, 2)
			env, _ := format.ParseEnvelope(obj)
			entries, err := format.ParseFooter(env, obj[env.FooterOff:])
			if err != nil {
				t.Fatal(err)
			}
			e := entries[0]
			key := format.SlotKey("star-0", 4, 9)
			check := func(b []byte) error { _, _, err := format.ParseSegment(b); return err }

			// Bucket 0 returns a bit-flipped copy: skipped, bucket 1's returned.
			r.injs[0].ForceCorrupt(1, objstore.CorruptFlip)
			got, err := read(ctx, key, int64(e.Offset), int64(e.Length), check)
			if err != nil || string(got) != string(obj[e.Offset:e.Offset+e.Length]) {
				t.Fatalf("read %x, %v", got, err)
			}
			if r.injs[1].Calls(objstore.OpGet) != 1 || r.injs[2].Calls(objstore.OpGet) != 0 {
				t.Errorf("fall-through order: gets %d %d", r.injs[1].Calls(objstore.OpGet), r.injs[2].Calls(objstore.OpGet))
			}
			// Truncated in transit: skipped by length even without a check.
			r.injs[0].ForceCorrupt(1, objstore.CorruptTruncate)
			if got, err := read(ctx, key, int64(e.Offset), int64(e.Length), nil); err != nil || len(got) != int(e.Length) {
				t.Fatalf("truncated: %d bytes, %v", len(got), err)
			}
			// Every copy bad: ErrNoCopy, never a bad copy.
			for _, inj := range r.injs {
				inj.ForceCorrupt(1, objstore.CorruptFlip)
			}
			if got, err := read(ctx, key, int64(e.Offset), int64(e.Length), check); !errors.Is(err, ErrNoCopy) || got != nil {
				t.Fatalf("all bad: %v", err)
			}
			// One down, the others bad: ErrUnavailable (retryable).
			r.injs[0].SetDown(true)
			for _, inj := range r.injs[1:] {
				inj.ForceCorrupt(1, objstore.CorruptFlip)
			}
			if _, err := read(ctx, key, int64(e.Offset), int64(e.Length), check); !errors.Is(err, objstore.ErrUnavailable) {
				t.Fatalf("down: %v", err)
			}
			r.injs[0].SetDown(false)
			// Missing everywhere: ErrNotFound. n < 0 reads to the end.
			if _, err := read(ctx, "nope", 0, 10, nil); !errors.Is(err, objstore.ErrNotFound) {
				t.Fatalf("missing: %v", err)
			}
			if got, err := read(ctx, key, 0, -1, func(b []byte) error { _, err := format.ParseFlight(b); return err }); err != nil || len(got) != len(obj) {
				t.Fatalf("whole: %d, %v", len(got), err)
			}
		})
	}
}

// TestHedgedReads: with the first bucket slow, Walk and ReadRange get their
// answer from the next bucket (asked after the hedge delay) instead of
// waiting for the slow one; with the first bucket fast, the others are not
// asked at all.
func TestHedgedReads(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, 3, 2)
	r.set.Clock, r.set.Hedge = nil, 5*time.Millisecond
	obj := flightBytes(2, 0)
	r.put(t, 2, 0, obj, 0, 1, 2)
	env, _ := format.ParseEnvelope(obj)
	entries, _ := format.ParseFooter(env, obj[env.FooterOff:])
	key := format.SlotKey("star-0", 2, 0)
	e := entries[0]

	// Fast first bucket: nobody else is asked.
	if _, err := r.set.ReadRange(ctx, key, int64(e.Offset), int64(e.Length), nil); err != nil {
		t.Fatal(err)
	}
	if r.injs[1].Calls(objstore.OpGet)+r.injs[2].Calls(objstore.OpGet) != 0 {
		t.Fatal("a fast first bucket was hedged")
	}
	// Slow first bucket: the answer comes from another.
	if err := r.injs[0].SetLatency(2*time.Second, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	got, err := r.set.ReadRange(ctx, key, int64(e.Offset), int64(e.Length), nil)
	if err != nil || string(got) != string(obj[e.Offset:e.Offset+e.Length]) || r.injs[1].Calls(objstore.OpGet) == 0 {
		t.Fatalf("read %v, bucket 1 gets %d", err, r.injs[1].Calls(objstore.OpGet))
	}
	var from int = -1
	if err := r.set.Walk(ctx, 2, 0, 1, func(s Slot) error { from = s.Bucket; return nil }); err != nil || from == 0 {
		t.Fatalf("walk read slot 0 from bucket %d (%v), want a hedged bucket", from, err)
	}
}

// TestReadRangeCancelledAsksNoOtherCopy: a read whose caller gives up
// (a read-ahead cancelled) while its first GET is in flight asks no other
// copy. Before, the cancelled GET counted as a failed copy and the next
// bucket was asked, then the next: a read-ahead cancelled at the end of a
// read made up to K GETs (TestReadSkipsLocationsBeforeStart saw 3).
func TestReadRangeCancelledAsksNoOtherCopy(t *testing.T) {
	r := newRig(t, 3, 2)
	r.set.Clock, r.set.Hedge = nil, time.Hour
	obj := flightBytes(2, 0)
	r.put(t, 2, 0, obj, 0, 1, 2)
	key := format.SlotKey("star-0", 2, 0)
	if err := r.injs[0].SetLatency(time.Hour, time.Hour); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for r.injs[0].Calls(objstore.OpGet) == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if _, err := r.set.ReadRange(ctx, key, 0, int64(len(obj)), nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("read: %v, want cancelled", err)
	}
	if n := r.injs[1].Calls(objstore.OpGet) + r.injs[2].Calls(objstore.OpGet); n != 0 {
		t.Fatalf("a cancelled read asked %d other copies", n)
	}
}
