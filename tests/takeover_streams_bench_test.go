package tests

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/passindex"
	"github.com/strandlog/strand/shared/star"
)

// manyIDs is n distinct stream ids, past the 65,535 that
// absorbtest.StreamIDs numbers on main (another branch widens it).
func manyIDs(n int) []format.StreamID {
	ids := make([]format.StreamID, n)
	for i := range ids {
		ids[i][0] = 0x5a
		binary.BigEndian.PutUint64(ids[i][8:], uint64(i)+1)
	}
	return ids
}

// BenchmarkTakeoverStreams measures takeover when the star that died had
// many streams, each with one released but unabsorbed append (nothing
// absorbed while it ran): the successor fences the chain, absorbs up to
// the cut (a ref per stream) and mints its epoch. It also reports the time
// to reopen every stream on the new star with its tail recovered from its
// last ref, which the API server does lazily, one stream at a time, on
// its first append after the takeover. Bucket calls take no modelled
// latency here: the figure is the star's and the absorb's own work.
// With index=on the absorb writes pass indexes (design 014) and each
// stream's tail is recovered from the index window (star.RecoverStream
// on passindex.Window.ForStream, as the node does), with no ref.
// docs/performance/many-streams.md ("Many streams") reports it:
//
//	go test ./tests -run '^$' -bench TakeoverStreams -benchtime 1x
func BenchmarkTakeoverStreams(b *testing.B) {
	for _, idx := range []string{"off", "on"} {
		for _, n := range []int{10000, 100000} {
			b.Run(fmt.Sprintf("index=%s/streams=%d", idx, n), func(b *testing.B) { takeoverStreams(b, n, idx == "on") })
		}
	}
}

func takeoverStreams(b *testing.B, n int, passIndex bool) {
	for range b.N {
		b.StopTimer()
		ctx := context.Background()
		w := newWorld(3)
		w.passIndex = passIndex
		old := w.startStar(b, false)
		ids := manyIDs(n)
		for _, id := range ids {
			if err := old.s.Open(star.StreamInfo{ID: id, Class: metastore.Express}); err != nil {
				b.Fatal(err)
			}
		}
		var pend []*star.Pending
		wait := func() {
			for _, p := range pend {
				if _, err := p.Wait(ctx); err != nil {
					b.Fatal(err)
				}
			}
			pend = pend[:0]
		}
		for i, id := range ids {
			p, err := old.s.Submit(ctx, id, []format.Record{{Body: []byte("r")}}, star.AppendOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if pend = append(pend, p); len(pend) == 4096 || i == len(ids)-1 {
				wait()
			}
		}
		old.kill()
		b.StartTimer()
		start := time.Now()
		nw := w.startStar(b, false)
		took := time.Since(start)
		b.StopTimer()
		head, err := w.meta.GetHead(ctx, metastore.ChainID{Star: "star-0", Class: metastore.Express})
		if err != nil || head.Checkpoint.Epoch != 1 || head.Checkpoint.Slot == 0 {
			b.Fatalf("takeover left the checkpoint at %s: %v", head.Checkpoint, err)
		}
		start = time.Now()
		if passIndex {
			win := &passindex.Window{Meta: w.meta, Bucket: w.settled}
			for _, id := range ids {
				st := metastore.Stream{ID: id.String(), Class: metastore.Express, Star: "star-0"}
				info, err := star.RecoverStream(ctx, win.ForStream(st), id, metastore.Express, time.Now())
				if err == nil {
					err = nw.s.Open(info)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		} else {
			w.open(b, nw.s, ids)
		}
		reopen := time.Since(start)
		for _, i := range []int{0, n / 2, n - 1} {
			next, _, err := nw.s.Tail(ids[i])
			if err != nil || next != 1 {
				b.Fatalf("stream %d after the takeover: tail %d, %v (want 1)", i, next, err)
			}
			_, err = w.meta.LastRef(ctx, ids[i].String())
			if passIndex != errors.Is(err, metastore.ErrNotFound) {
				b.Fatalf("stream %d after the takeover, index %v: last ref: %v", i, passIndex, err)
			}
		}
		nw.kill()
		b.ReportMetric(float64(took.Milliseconds()), "ms/takeover")
		b.ReportMetric(float64(reopen.Milliseconds()), "ms/reopen-all")
		b.ReportMetric(float64(head.Checkpoint.Slot), "flights")
	}
}
