package sim

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/star"
)

// TestTailOfAbandonedBatchSurvivesKill is one interleaving TestSimEdges'
// "next seq moved backward" could come from, scripted: a star's tail
// (Star.Tail, what the edges checker keeps as the stream's highest) that
// covers a batch its producer was told is of unknown outcome. Every
// bucket refuses writes, so the batch's flight halts the epoch; past the
// halt wait the batch fails with star.ErrOutcomeUnknown (abandoned, never
// in the producer's book); the buckets heal, the in-process recovery
// commits it in the next epoch, and the tail moves past it. The star is
// then killed (or killed while the epoch is still halted, before the
// recovery) and a successor takes over, in refs mode and on the pass
// index (with the first records settled behind refs, and not): its
// tail is never below the killed star's, and every seq below it reads.
func TestTailOfAbandonedBatchSurvivesKill(t *testing.T) {
	for _, pass := range []bool{false, true} {
		for _, settled := range []bool{false, true} {
			for _, halted := range []bool{false, true} {
				t.Run(fmt.Sprintf("passindex=%v/settled=%v/killed_halted=%v", pass, settled, halted), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) { tailAfterAbandon(t, pass, settled, halted) })
				})
			}
		}
	}
}

func tailAfterAbandon(t *testing.T, pass, settled, halted bool) {
	ctx := context.Background()
	opt := DefaultOptions()
	opt.Streams = 1
	opt.HaltWait = 100 * time.Millisecond
	opt.PassIndex = pass
	w, err := NewWorld(2, opt)
	if err != nil {
		t.Fatal(err)
	}
	n, err := w.StartNode(ctx, 1, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { n.Kill() }()
	id := w.IDs[0]
	appendOne := func(body string) (star.Ack, error) {
		return n.Star.Append(ctx, id, []format.Record{{Body: []byte(body)}}, star.AppendOptions{})
	}
	for i := range 5 {
		if _, err := appendOne(fmt.Sprintf("acked %d", i)); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if settled {
		// The first records behind refs (settled, flushed), so that a
		// successor has refs below the abandoned batch's part.
		st := w.Settler()
		for range 4 {
			time.Sleep(600 * time.Millisecond) // absorbed, then past settle's flush age
			if _, err := st.Run(ctx, Chain); err != nil {
				t.Fatalf("settle: %v", err)
			}
		}
		if last, err := w.Meta.LastRef(ctx, id.String()); err != nil || last.LastSeq != 4 {
			t.Fatalf("after settle, the last ref %d-%d (%v), want one ending at 4", last.FirstSeq, last.LastSeq, err)
		}
	}
	readOnly := func(on bool) {
		p := 0.0
		if on {
			p = 1
		}
		for _, in := range w.Inj {
			if err := in.SetErrorRate(p, objstore.OpPut); err != nil {
				t.Fatal(err)
			}
		}
	}
	readOnly(true)
	if _, err := appendOne("abandoned"); !errors.Is(err, star.ErrOutcomeUnknown) {
		t.Fatalf("an append while every bucket refuses writes: %v, want star.ErrOutcomeUnknown (halted past the halt wait)", err)
	}
	before, _, err := n.Star.Tail(id)
	if err != nil {
		t.Fatal(err)
	}
	if before != 5 {
		t.Fatalf("tail %d while halted, want 5 (the abandoned batch not acknowledged)", before)
	}
	if !halted {
		readOnly(false)
		// The in-process recovery commits the abandoned batch in the next
		// epoch: the tail covers it though nobody was told it was written.
		for deadline := time.Now().Add(30 * time.Second); ; {
			time.Sleep(50 * time.Millisecond)
			if before, _, _ = n.Star.Tail(id); before == 6 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the recovery never committed the abandoned batch: tail %d, want 6", before)
			}
		}
		time.Sleep(200 * time.Millisecond) // absorbed
		synctest.Wait()
	}
	n.Kill()
	readOnly(false)
	n, err = w.StartNode(ctx, 2, 20*time.Millisecond)
	if err != nil {
		t.Fatalf("successor: %v", err)
	}
	after, _, err := n.Star.Tail(id)
	if err != nil {
		t.Fatal(err)
	}
	if after < before {
		t.Fatalf("the successor opened the stream at next seq %d, below the killed star's tail %d", after, before)
	}
	recs, _, err := ReadAll(ctx, w.Reader(n.Star, true), w.Streams[0])
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if uint64(len(recs)) != after {
		t.Fatalf("read %d records, want every seq below the tail %d", len(recs), after)
	}
	for i, r := range recs {
		want := fmt.Sprintf("acked %d", i)
		if i == 5 {
			want = "abandoned"
		}
		if r.Seq != uint64(i) || string(r.Body) != want {
			t.Fatalf("seq %d reads %d %q, want %q", i, r.Seq, r.Body, want)
		}
	}
	t.Logf("killed at tail %d, successor at %d", before, after)
}
