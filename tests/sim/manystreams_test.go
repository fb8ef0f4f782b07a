package sim

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/metacount"
	"github.com/strandlog/strand/shared/read"
	"github.com/strandlog/strand/shared/star"
)

var manySeedsFlag = flag.Int("many-seeds", 3, "seeds of TestSimManyStreams (seeds 1..n; -seed replays one)")

// TestSimManyStreams is issue 17's workload on the pass index (design
// 014): many streams, each appended to rarely, in single-record batches of
// about 100 bytes, while settle, trim and the garbage probe run now and
// then, and the star is killed and taken over once (every stream's tail
// recovered from the window and the refs). Against the producers' own book
// (never the system's state):
//
//   - every acknowledged record reads back at its seq with its body, by
//     seq, mid-run and at the end;
//   - a read by timestamp T starts at the first record the book has at or
//     after T (timestamps are the producers', increasing);
//   - no append after the takeover reuses a seq (the book never gets two
//     bodies at one seq);
//   - the absorb wrote no ref (every ref is settled), and at the end, with
//     settlement caught up, no pass index is left, and runs and packs only
//     in [flushed, settled);
//   - settle flushes (FlushBytes 600, FlushAge 120 ms of record time), and
//     writes under one SettleRef per four batches (logged per batch).
func TestSimManyStreams(t *testing.T) {
	for _, seed := range budgetSeeds(*manySeedsFlag) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("replay: go test ./tests/sim -run TestSimManyStreams -seed=%d -v", seed)
			synctest.Test(t, func(t *testing.T) { runManyStreams(t, seed, 300, 500) })
		})
	}
}

func runManyStreams(t *testing.T, seed int64, steps, streams int) {
	opt := DefaultOptions()
	opt.Streams, opt.PassIndex, opt.BacklogFlights = streams, true, 64
	// Flush (design 014, level 1) by bytes after about 6 records of a
	// stream, by age after 120 steps (record timestamps are 1000+step ms):
	// most streams are packed into runs, some flushed by bytes, the rest
	// by age.
	opt.FlushBytes, opt.FlushAge = 600, 120*time.Millisecond
	// Settle's clock for quiet chains follows the record timestamps (the
	// bubble's is decades ahead of them: every idle step would flush
	// every stream).
	recordNow := &recordClock{}
	recordNow.ms.Store(1_000)
	opt.SettleClock = recordNow
	w, err := NewWorld(seed, opt)
	if err != nil {
		t.Fatal(err)
	}
	count := metacount.New(w.Meta)
	w.SettleMeta = NewMetaFaults(count, seed*7+2) // what absorb, settle, trim and probe write, counted
	ctx := context.Background()
	n, err := w.StartNode(ctx, 1, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { n.Kill() }()
	rng := rand.New(rand.NewPCG(uint64(seed), 0x3a17))
	type rec struct {
		body string
		ts   int64
	}
	book := make([]map[uint64]rec, streams)
	for i := range book {
		book[i] = map[uint64]rec{}
	}
	var mu sync.Mutex
	batches := 0
	check := func(what string, sample []int) {
		t.Helper()
		rd := w.Reader(n.Star, true)
		for _, i := range sample {
			got, tail, err := ReadAll(ctx, rd, w.Streams[i])
			if err != nil {
				t.Fatalf("seed %d %s: read stream %d: %v", seed, what, i, err)
			}
			if tail != uint64(len(book[i])) || len(got) != len(book[i]) {
				t.Fatalf("seed %d %s: stream %d: %d records read, tail %d, %d acknowledged", seed, what, i, len(got), tail, len(book[i]))
			}
			for _, r := range got {
				if b, ok := book[i][r.Seq]; !ok || b.body != string(r.Body) || b.ts != r.TimestampMs {
					t.Fatalf("seed %d %s: stream %d seq %d: %q at %d, acknowledged %+v (%v)", seed, what, i, r.Seq, r.Body, r.TimestampMs, b, ok)
				}
			}
			if len(got) == 0 {
				continue
			}
			// By timestamp: from a record's, and from just after it.
			pick := got[rng.IntN(len(got))]
			for _, ts := range []int64{pick.TimestampMs, pick.TimestampMs + 1} {
				res, err := rd.Read(ctx, w.Streams[i], read.Start{Kind: read.FromTimestamp, TsMs: ts}, read.Limits{Count: 1})
				if err != nil {
					t.Fatalf("seed %d %s: stream %d from ts %d: %v", seed, what, i, ts, err)
				}
				want := -1
				for s := range uint64(len(book[i])) {
					if book[i][s].ts >= ts {
						want = int(s)
						break
					}
				}
				switch {
				case want < 0 && len(res.Records) != 0:
					t.Fatalf("seed %d %s: stream %d from ts %d: seq %d, want none", seed, what, i, ts, res.Records[0].Seq)
				case want >= 0 && (len(res.Records) != 1 || res.Records[0].Seq != uint64(want)):
					t.Fatalf("seed %d %s: stream %d from ts %d: %v, want seq %d", seed, what, i, ts, res.Records, want)
				}
			}
		}
	}
	all := make([]int, streams)
	for i := range all {
		all[i] = i
	}
	for step := range steps {
		// A burst of single-record batches to random streams, at once.
		var wg sync.WaitGroup
		for j := range 20 {
			i := rng.IntN(streams)
			body := fmt.Sprintf("s%d-%d-%d-%s", i, step, j, filler(60))
			ts := int64(1_000 + step) // increasing: the book's timestamps
			recordNow.ms.Store(ts)
			wg.Go(func() {
				ack, err := n.Star.Append(ctx, w.IDs[i], []format.Record{{TimestampMs: ts, Body: []byte(body)}}, star.AppendOptions{})
				if err != nil {
					t.Errorf("seed %d step %d: append to stream %d: %v", seed, step, i, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if old, ok := book[i][ack.FirstSeq]; ok {
					t.Errorf("seed %d step %d: stream %d seq %d acknowledged twice: %q and %q", seed, step, i, ack.FirstSeq, old.body, body)
				}
				book[i][ack.FirstSeq] = rec{body, ts}
				batches++
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		time.Sleep(time.Duration(1+rng.IntN(20)) * time.Millisecond)
		switch {
		case step%37 == 36:
			if _, err := w.Settler().Run(ctx, Chain); err != nil {
				t.Fatalf("seed %d step %d: settle: %v", seed, step, err)
			}
		case step%53 == 52:
			if _, err := w.Trimmer().Run(ctx, Chain); err != nil {
				t.Fatalf("seed %d step %d: trim: %v", seed, step, err)
			}
			if _, err := w.Prober().Sweep(ctx); err != nil {
				t.Fatalf("seed %d step %d: probe: %v", seed, step, err)
			}
		case step == steps/2:
			// Every batch acknowledged: a takeover recovers each tail from
			// the window and the refs.
			n.Kill()
			if n, err = w.StartNode(ctx, 2, 20*time.Millisecond); err != nil {
				t.Fatalf("seed %d: takeover: %v", seed, err)
			}
			check("after the takeover", all)
		case step%50 == 0:
			check(fmt.Sprintf("step %d", step), []int{rng.IntN(streams), rng.IntN(streams)})
		}
	}
	check("at the end", all)
	// Settlement catches up: everything behind settled refs, no pass index
	// left.
	if err := w.Absorber().AbsorbTo(ctx, Chain, n.Star.Released(Chain)); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := w.Settler().Run(ctx, Chain); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Trimmer().Run(ctx, Chain); err != nil {
			t.Fatal(err)
		}
	}
	h, err := w.Meta.GetHead(ctx, Chain)
	if err != nil || h.Settled != h.Checkpoint || h.Trimmed != h.Settled || h.Settled.Less(h.Flushed) {
		t.Fatalf("seed %d: head after catching up: %+v, %v", seed, h, err)
	}
	// No pass index left; runs only in [flushed, settled), packs only of
	// those runs (trim deleted the flushed ones).
	keys, err := w.SettledMem.List(ctx, "index/")
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	for _, k := range keys {
		var e, slot uint64
		if _, err := fmt.Sscanf(k, "index/"+StarID+"/express/runs/%d/%d", &e, &slot); err != nil {
			if _, err := fmt.Sscanf(k, "index/"+StarID+"/express/merged/%d/%d", &e, &slot); err != nil {
				t.Fatalf("seed %d: pass index left: %s", seed, k)
			}
		}
		if at := (metastore.Cursor{Epoch: e, Slot: slot}); at.Less(h.Flushed) || !at.Less(h.Settled) {
			t.Fatalf("seed %d: run %s outside [flushed %s, settled %s)", seed, k, h.Flushed, h.Settled)
		}
		if !strings.HasSuffix(k, format.CommandIndexKey("")) { // a run's command index: beside it, not a run
			runs++
		}
	}
	packs, err := w.SettledMem.List(ctx, "packs/")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range packs {
		var e, first uint64
		_, err := fmt.Sscanf(k, "packs/"+StarID+"/express/%d/%d-", &e, &first)
		if err != nil {
			_, err = fmt.Sscanf(k, "packs/"+StarID+"/express/merged/%d/%d-", &e, &first)
		}
		if err != nil || (metastore.Cursor{Epoch: e, Slot: first}).Less(h.Flushed) {
			t.Fatalf("seed %d: pack %s below flushed %s (%v)", seed, k, h.Flushed, err)
		}
	}
	for i, id := range w.IDs {
		refs, err := w.Meta.QueryRefs(ctx, id.String(), 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range refs {
			if slices.ContainsFunc(r.Locations, func(l metastore.Location) bool { return !l.Settled }) {
				t.Fatalf("seed %d: stream %d has a transit ref: the absorb wrote refs", seed, i)
			}
		}
	}
	check("settled", all)
	c := count.Snapshot()
	if c.Of(metacount.PutRefs) != 0 || c.RefItems != 0 {
		t.Fatalf("seed %d: the absorb wrote refs: %s", seed, c)
	}
	flushed := 0
	for _, id := range w.IDs {
		refs, err := w.Meta.QueryRefs(ctx, id.String(), 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(refs) > 0 {
			flushed++
		}
	}
	// Settle's item writes per batch: one SettleRef per flush, not one per
	// stream and settle step (with every stream flushed at every step,
	// FlushBytes 1, as level 0 did: about 3,200 for the 6,000 batches over
	// 500 streams, 0.53 per batch).
	settleRefs := c.Of(metacount.SettleRef)
	t.Logf("seed %d: %d streams, %d batches; %d SettleRef (%.3f per batch), %d streams flushed, %d live runs (merged and not), %d packs, merged cursor %s (fanout %d); settlement's metastore calls: %s",
		seed, streams, batches, settleRefs, float64(settleRefs)/float64(batches), flushed, runs, len(packs), h.Merged, w.Opt.Fanout, c)
	if flushed == 0 || settleRefs == 0 {
		t.Fatalf("seed %d: nothing flushed: the simulation must exercise flush", seed)
	}
	if settleRefs*4 > int64(batches) {
		t.Fatalf("seed %d: %d SettleRef for %d batches: settle's writes still follow the streams it settles", seed, settleRefs, batches)
	}
}

// recordClock is a clock at the workload's record time (Now); timers are
// the bubble's.
type recordClock struct {
	clock.Real
	ms atomic.Int64
}

func (c *recordClock) Now() time.Time { return time.UnixMilli(c.ms.Load()) }
