package star

import (
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

func pid(b byte) format.ProducerID {
	var p format.ProducerID
	p[0], p[15] = b, 1
	return p
}

// TestDedupeTable drives the pure table against the rules: next in line,
// retry (pending or committed), gap, too old, idle expiry, LRU bound.
func TestDedupeTable(t *testing.T) {
	const day = int64(24 * time.Hour / time.Millisecond)
	d := newDedupe(3, 7*24*time.Hour, 2, newProducerLRU(1<<20))
	a := pid(1)
	if v := d.check(a, 40, 0); v.dup != nil || v.err != nil {
		t.Fatalf("unknown producer at any seq: %+v", v)
	}
	bs := make([]*batch, 5)
	for i := range bs {
		bs[i] = &batch{producer: a, batchSeq: uint64(40 + i)}
		if v := d.check(a, uint64(40+i), 0); v.dup != nil || v.err != nil {
			t.Fatalf("seq %d: %+v", 40+i, v)
		}
		d.admit(a, uint64(40+i), bs[i], 0)
		d.released(bs[i], Ack{FirstSeq: uint64(10 * i), LastSeq: uint64(10*i + 9)})
	}
	// Window 3: 42..44 remembered with their acks.
	for seq, first := range map[uint64]uint64{42: 20, 43: 30, 44: 40} {
		v := d.check(a, seq, day)
		if v.dup == nil || v.dup.b != nil || v.dup.ack.FirstSeq != first || v.dup.ack.LastSeq != first+9 {
			t.Fatalf("retry of %d: %+v", seq, v)
		}
	}
	if v := d.check(a, 41, day); !errors.Is(v.err, ErrBatchSeqTooOld) {
		t.Fatalf("41: %v", v.err)
	}
	if v := d.check(a, 46, day); !errors.Is(v.err, ErrBatchSeqGap) || v.err.Error() == "" {
		t.Fatalf("46: %v", v.err)
	} else if want := "expected 45"; !strings.Contains(v.err.Error(), want) {
		t.Fatalf("gap error %q does not name %q", v.err, want)
	}
	// A pending batch is a pending dup.
	p := &batch{producer: a, batchSeq: 45}
	d.admit(a, 45, p, day)
	if v := d.check(a, 45, day); v.dup == nil || v.dup.b != p {
		t.Fatalf("pending retry: %+v", v)
	}
	// Two producers fit; a third evicts the least recently used (a was
	// used at day 1, b at day 2).
	d.released(p, Ack{FirstSeq: 50, LastSeq: 50})
	b, c := pid(2), pid(3)
	bb := &batch{producer: b}
	d.admit(b, 0, bb, 2*day)
	d.released(bb, Ack{})
	d.admit(c, 0, &batch{}, 3*day)
	if d.ps[a] != nil || d.ps[b] == nil || d.ps[c] == nil {
		t.Fatalf("LRU eviction kept %v", d.ps)
	}
	// A producer with a batch in flight is never the one evicted.
	e := newDedupe(3, 7*24*time.Hour, 2, newProducerLRU(1<<20))
	e.admit(a, 0, &batch{}, 0) // in flight, least recently used
	eb := &batch{producer: b}
	e.admit(b, 0, eb, day)
	e.released(eb, Ack{}) // b's batch committed
	e.admit(c, 0, &batch{}, 2*day)
	if e.ps[a] == nil || e.ps[b] != nil {
		t.Fatalf("evicted the producer with a batch in flight: %v", e.ps)
	}
	// Idle past 7 days: forgotten, any seq starts afresh.
	if v := d.check(b, 99, 2*day+7*day+1); v.err != nil || v.dup != nil || d.ps[b] != nil {
		t.Fatalf("expired producer: %+v", v)
	}
}

// TestRetryGetsTheOriginalAck: a retried (producer, batch seq) is written
// once; the retry gets the same first and last seq, whether the original
// is committed or still in flight; the flight carries the batch table.
func TestRetryGetsTheOriginalAck(t *testing.T) {
	h, g, id := gatedStream(t)
	ctx := context.Background()
	p := pid(7)
	first, err := h.star.Submit(ctx, id, recs(3, func(i int) []byte { return []byte("a") }), AppendOptions{Producer: p, BatchSeq: 0})
	if err != nil {
		t.Fatal(err)
	}
	// The retry arrives while the original is in flight: it waits for it.
	retried := make(chan Ack, 1)
	go func() {
		a, err := h.star.Append(ctx, id, recs(3, func(i int) []byte { return []byte("a") }), AppendOptions{Producer: p, BatchSeq: 0})
		if err != nil {
			t.Error(err)
		}
		retried <- a
	}()
	select {
	case a := <-retried:
		t.Fatalf("retry answered %+v before the original committed", a)
	case <-time.After(50 * time.Millisecond):
	}
	close(g.open)
	a0, err := first.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a := <-retried; a.FirstSeq != a0.FirstSeq || a.LastSeq != a0.LastSeq {
		t.Fatalf("retry ack %+v, original %+v", a, a0)
	}
	a1, err := h.star.Append(ctx, id, recs(2, func(i int) []byte { return []byte("b") }), AppendOptions{Producer: p, BatchSeq: 1})
	if err != nil || a1.FirstSeq != 3 || a1.LastSeq != 4 {
		t.Fatal(a1, err)
	}
	// Retries of committed batches.
	for seq, want := range map[uint64]Ack{0: a0, 1: a1} {
		a, err := h.star.Append(ctx, id, recs(1, func(i int) []byte { return []byte("x") }), AppendOptions{Producer: p, BatchSeq: seq})
		if err != nil || a.FirstSeq != want.FirstSeq || a.LastSeq != want.LastSeq {
			t.Fatalf("retry of %d: %+v %v, want %+v", seq, a, err, want)
		}
	}
	if _, err := h.star.Append(ctx, id, recs(1, nil2), AppendOptions{Producer: p, BatchSeq: 5}); !errors.Is(err, ErrBatchSeqGap) {
		t.Fatalf("gap: %v", err)
	}
	if next, _, _ := h.star.Tail(id); next != 5 {
		t.Fatalf("tail %d: a retry was written again", next)
	}
	// The chain holds each batch once, and the flights list the batches.
	var listed []format.BatchEntry
	records := 0
	for slot := uint64(0); ; slot++ {
		obj, err := g.Get(ctx, format.SlotKey("star-0", 1, slot), 0, -1)
		if err != nil {
			break
		}
		f, err := format.ParseFlight(obj)
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, f.Batches...)
		for _, e := range f.Entries {
			records += int(e.Count)
		}
	}
	if records != 5 {
		t.Fatalf("chain holds %d records, want 5", records)
	}
	if len(listed) != 2 || listed[0].BatchSeq != 0 || listed[0].Count != 3 || listed[1].BatchSeq != 1 || listed[1].FirstSeq != 3 || listed[0].Producer != p {
		t.Fatalf("batch tables list %+v", listed)
	}
}

func nil2(int) []byte { return nil }

// TestOpenSeedsTheTable: a stream opened with recovered producer states
// (a successor after takeover) answers retries from them.
func TestOpenSeedsTheTable(t *testing.T) {
	h := newHarness(t, metastore.Standard, 1, 1)
	h.start()
	id := sid(0)
	p := pid(9)
	if err := h.star.Open(StreamInfo{ID: id, Class: metastore.Standard, Next: 100,
		Producers: []ProducerState{{ID: p, LastMs: time.Now().UnixMilli(), Batches: []BatchMark{{BatchSeq: 3, FirstSeq: 90, LastSeq: 94}, {BatchSeq: 4, FirstSeq: 95, LastSeq: 99}}}}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := h.star.Append(ctx, id, recs(1, nil2), AppendOptions{Producer: p, BatchSeq: 4})
	if err != nil || a.FirstSeq != 95 || a.LastSeq != 99 || a.Tail != 100 {
		t.Fatalf("retry after takeover: %+v %v", a, err)
	}
	if _, err := h.star.Append(ctx, id, recs(1, nil2), AppendOptions{Producer: p, BatchSeq: 2}); !errors.Is(err, ErrBatchSeqTooOld) {
		t.Fatalf("too old: %v", err)
	}
	a, err = h.star.Append(ctx, id, recs(1, nil2), AppendOptions{Producer: p, BatchSeq: 5})
	if err != nil || a.FirstSeq != 100 {
		t.Fatalf("next batch: %+v %v", a, err)
	}
}

// BenchmarkDedupeBytesPerProducer reports the heap bytes one remembered
// producer costs with a full window (the docs quote BenchmarkDedupeMemory,
// which measures the same at a stream's bound):
// go test ./shared/star -run XXX -bench DedupeBytesPerProducer -benchtime 1x
func BenchmarkDedupeBytesPerProducer(b *testing.B) {
	const n = 20000
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		d := newDedupe(DefaultDedupeWindow, DefaultProducerIdle, n, newProducerLRU(n))
		for i := range n {
			var p format.ProducerID
			binary.BigEndian.PutUint64(p[:], uint64(i)+1)
			for s := range uint64(DefaultDedupeWindow) {
				bt := &batch{producer: p, batchSeq: s}
				d.admit(p, s, bt, 0)
				d.released(bt, Ack{FirstSeq: s, LastSeq: s})
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/producer")
		runtime.KeepAlive(d)
	}
}
