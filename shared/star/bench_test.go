package star

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// benchStar is a started Standard star on one memory bucket (no latency),
// with the given trace hook.
func benchStar(tb testing.TB, trace func(TraceEvent)) *Star {
	tb.Helper()
	cfg := Defaults()
	cfg.Standard = ClassConfig{Buckets: []objstore.Bucket{objstore.NewMem("b0")}, W: 1, MemoryBufferMiB: 64, ParallelUploads: 16,
		FlushDeadline: time.Millisecond, FlightKiB: 1024, CommitDeadline: 10 * time.Second}
	cfg.Express = ClassConfig{}
	cfg.Rand = seededReader{rand.New(rand.NewPCG(1, 2))}
	cfg.Trace = trace
	s, err := New(cfg, metastore.NewMem(), Options{})
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// TestTraceReportsEveryFlightInOrder: with Config.Trace set, every flight is
// reported cut, then durable, then released; releases come in slot order;
// the cut event names exactly the batches that rode the slot; and times
// never run backwards within a flight.
func TestTraceReportsEveryFlightInOrder(t *testing.T) {
	var mu sync.Mutex
	cuts := map[uint64]TraceEvent{}
	durable := map[uint64]time.Time{}
	var released []uint64
	var bad []string
	s := benchStar(t, func(ev TraceEvent) {
		mu.Lock()
		defer mu.Unlock()
		switch ev.Kind {
		case TraceCut:
			if ev.Bytes <= format.EnvelopeSize || len(ev.Batches) == 0 {
				bad = append(bad, fmt.Sprintf("cut %d: %d bytes, %d batches", ev.Slot, ev.Bytes, len(ev.Batches)))
			}
			cuts[ev.Slot] = ev
		case TraceDurable:
			c, ok := cuts[ev.Slot]
			if !ok || ev.At.Before(c.At) {
				bad = append(bad, fmt.Sprintf("durable %d before its cut", ev.Slot))
			}
			durable[ev.Slot] = ev.At
		case TraceRelease:
			d, ok := durable[ev.Slot]
			if !ok || ev.At.Before(d) {
				bad = append(bad, fmt.Sprintf("release %d before durable", ev.Slot))
			}
			released = append(released, ev.Slot)
		}
	})
	id := sid(0)
	if err := s.Open(StreamInfo{ID: id, Class: metastore.Standard}); err != nil {
		t.Fatal(err)
	}
	type sent struct{ first uint64 }
	var pend []*Pending
	for i := 0; i < 200; i++ {
		p, err := s.Submit(context.Background(), id, recs(1+i%3, func(int) []byte { return make([]byte, 100) }), AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pend = append(pend, p)
	}
	seen := map[uint64]bool{}
	for _, p := range pend {
		a, err := p.Wait(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		seen[a.FirstSeq] = true
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatal(bad)
	}
	if len(released) == 0 || len(released) != len(cuts) {
		t.Fatalf("%d releases, %d cuts", len(released), len(cuts))
	}
	for i, sl := range released {
		if sl != uint64(i) {
			t.Fatalf("release %d is slot %d: not in slot order", i, sl)
		}
	}
	traced := 0
	for _, c := range cuts {
		for _, b := range c.Batches {
			if b.Stream != id || !seen[b.FirstSeq] {
				t.Fatalf("cut of slot %d names batch %+v that was never acked", c.Slot, b)
			}
			traced++
		}
	}
	if traced != len(pend) {
		t.Fatalf("cuts name %d batches, %d were acked", traced, len(pend))
	}
}

// BenchmarkOrder is the pure ack-release core: claim a slot, mark it
// durable (out of order in pairs), release. Steady state allocates nothing.
func BenchmarkOrder(b *testing.B) {
	o := newOrder(0, 64)
	b.ReportAllocs()
	for b.Loop() {
		s1, s2 := o.claim(), o.claim()
		o.markDurable(s2)
		if _, to := o.markDurable(s1); to != s2+1 {
			b.Fatal("not released")
		}
	}
}

// BenchmarkRender is the bundle encode of a 1 MiB flight: 16 batches of 64
// records of 1 KiB over 4 streams, into a reused builder.
func BenchmarkRender(b *testing.B) {
	s := benchStar(b, nil)
	var batches []*batch
	rs := recs(64, func(int) []byte { return make([]byte, 1024-14) })
	var sts []*stream
	for i := 0; i < 4; i++ {
		sts = append(sts, &stream{id: sid(i), l: s.loglets[metastore.Standard]})
	}
	bytes := 0
	for i := 0; i < 16; i++ {
		size, _ := format.ValidateBatch(rs)
		bt := newBatch(sts[i%4], rs, size, 1)
		bt.first = uint64(i/4) * 64
		bt.clampTimestamps(0)
		batches = append(batches, bt)
		bytes += size
	}
	bld := format.NewBuilder()
	b.SetBytes(int64(bytes))
	b.ReportAllocs()
	var n format.Nonce
	slot := uint64(0)
	for b.Loop() {
		render(bld, 1, slot, n, batches, nil)
		slot++
	}
}

// BenchmarkSubmit is admission: validate, encode the records, sequence and
// pool one batch of 64 records of 1 KiB (the flusher cuts and commits to a
// memory bucket behind it). It reports the allocations per batch.
func BenchmarkSubmit(b *testing.B) { benchSubmit(b, false) }

// BenchmarkSubmitIdempotent is BenchmarkSubmit with a producer id and batch
// seq on every batch: the dedupe table's cost on admission and release
// (docs/performance/ingest.md compares the two).
func BenchmarkSubmitIdempotent(b *testing.B) { benchSubmit(b, true) }

func benchSubmit(b *testing.B, idem bool) {
	s := benchStar(b, nil)
	id := sid(0)
	if err := s.Open(StreamInfo{ID: id, Class: metastore.Standard}); err != nil {
		b.Fatal(err)
	}
	rs := recs(64, func(int) []byte { return make([]byte, 1024-14) })
	size, _ := format.ValidateBatch(rs)
	chain := metastore.ChainID{Star: s.ID(), Class: metastore.Standard}
	ctx := context.Background()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	var last *Pending
	i := 0
	var opt AppendOptions
	if idem {
		opt.Producer = format.ProducerID{1}
	}
	// cpu-ns/op: the process's CPU time (user and system, every
	// goroutine) per batch, which a loaded machine inflates far less than
	// the wall clock's ns/op (docs/performance/ingest.md compares on and off).
	cpu0 := processCPU()
	for b.Loop() {
		p, err := s.Submit(ctx, id, rs, opt)
		opt.BatchSeq++
		if err != nil {
			b.Fatal(err)
		}
		last = p
		if i++; i%256 == 0 {
			// Stand in for the absorb so the backlog budget never stalls.
			if _, err := last.Wait(ctx); err != nil {
				b.Fatal(err)
			}
			s.Absorbed(chain, s.Released(chain))
		}
	}
	if _, err := last.Wait(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRelease is the ack path: a durable flight of 16 batches releases
// (acks, metrics, flight index). Batches are rebuilt off the clock.
func BenchmarkRelease(b *testing.B) {
	s := benchStar(b, nil)
	l := s.loglets[metastore.Standard]
	st := &stream{id: sid(0), l: l}
	const per = 16
	mk := func() *flight {
		f := &flight{epoch: 1}
		for i := 0; i < per; i++ {
			f.batches = append(f.batches, &batch{st: st, recs: 1, size: 100, done: make(chan struct{})})
		}
		return f
	}
	// A private loglet state: detach from the running flusher by using a
	// fresh order and inflight map under the lock for each round.
	const round = 512
	flights := make([]*flight, round)
	b.ReportAllocs()
	b.StopTimer()
	n := 0
	for n < b.N {
		for i := range flights {
			flights[i] = mk()
		}
		l.mu.Lock()
		l.epoch = 1
		l.ord = newOrder(0, round)
		l.released = l.released[:0]
		for i, f := range flights {
			f.slot = l.ord.claim()
			l.inflight[f.slot] = flights[i]
		}
		l.mu.Unlock()
		b.StartTimer()
		for i := 0; i < round && n < b.N; i++ {
			l.markDurable(flights[i])
			n++
		}
		b.StopTimer()
		l.mu.Lock()
		clear(l.inflight)
		l.mu.Unlock()
	}
}
