package star

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// heapInuse collects garbage and reads the heap in use.
func heapInuse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// streamMemory opens n streams on a fresh star and appends one batch of
// one 100-byte record to each (with a producer id and batch seq 0 when
// idem), waiting for every ack. Nothing absorbs, so every batch stays in
// the flight index. It returns the heap the star gained per stream once
// the streams were open, and once the batches were acknowledged, less the
// bytes the memory bucket holds (S3's, not the star's).
func streamMemory(tb testing.TB, n int, idem bool) (open, appended float64) {
	s := benchStar(tb, nil)
	ctx := context.Background()
	h0 := heapInuse()
	for i := range n {
		if err := s.Open(StreamInfo{ID: sid(i), Class: metastore.Standard}); err != nil {
			tb.Fatal(err)
		}
	}
	h1 := heapInuse()
	body := make([]byte, 100)
	pend := make([]*Pending, 0, 4096)
	wait := func() {
		for _, p := range pend {
			if _, err := p.Wait(ctx); err != nil {
				tb.Fatal(err)
			}
		}
		pend = pend[:0]
	}
	for i := range n {
		var opt AppendOptions
		if idem {
			binary.BigEndian.PutUint64(opt.Producer[8:], uint64(i)+1)
		}
		p, err := s.Submit(ctx, sid(i), []format.Record{{Body: body}}, opt)
		if err != nil {
			tb.Fatal(err)
		}
		if pend = append(pend, p); len(pend) == cap(pend) {
			wait()
		}
	}
	wait()
	pend = nil
	h2 := heapInuse() - bucketBytes(tb, s.cfg.Standard.Buckets[0])
	if got := s.Health(); !got.OK() {
		tb.Fatalf("star unhealthy after the appends: %+v", got)
	}
	return float64(h1-h0) / float64(n), float64(h2-h0) / float64(n)
}

// BenchmarkStreamMemory measures the star's heap per stream: open and
// idle, then with one released, unabsorbed 100-byte batch in the flight
// index (what a stream costs between an append and the next absorb pass),
// then the same with an idempotent producer (its dedupe table holds one
// producer). docs/performance/many-streams.md ("Many streams") reports it:
//
//	go test ./shared/star -run '^$' -bench StreamMemory -benchtime 1x
func BenchmarkStreamMemory(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			for range b.N {
				idle, active := streamMemory(b, n, false)
				_, idem := streamMemory(b, n, true)
				b.ReportMetric(idle, "B/idle-stream")
				b.ReportMetric(active, "B/active-stream")
				b.ReportMetric(idem, "B/idempotent-stream")
			}
		})
	}
}

// bucketBytes is the bytes of the objects in b.
func bucketBytes(tb testing.TB, b objstore.Bucket) int64 {
	ctx := context.Background()
	keys, err := b.List(ctx, "")
	if err != nil {
		tb.Fatal(err)
	}
	var n int64
	for _, k := range keys {
		size, err := b.Head(ctx, k)
		if err != nil {
			tb.Fatal(err)
		}
		n += size
	}
	return n
}

// A released flight waiting for the absorb gives its rendered object back
// as soon as every copy is uploaded (it held a second copy of its batches'
// bytes until the absorb passed it), while the backlog still counts its
// bytes and the flight index still serves its records.
func TestFlightObjectFreedOnceUploaded(t *testing.T) {
	s := benchStar(t, nil)
	ctx := context.Background()
	id := sid(0)
	if err := s.Open(StreamInfo{ID: id, Class: metastore.Standard}); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if _, err := s.Append(ctx, id, []format.Record{{Body: []byte(fmt.Sprint("r", i))}}, AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	l := s.loglets[metastore.Standard]
	// Uploads finish just after the acks (the commit goroutine's defer).
	var held, sum int
	for try := 0; ; try++ {
		l.mu.Lock()
		held, sum = 0, 0
		for _, f := range l.released {
			if f.obj != nil || f.builder != nil {
				held++
			}
			sum += f.objLen
		}
		rel, relBytes := len(l.released), l.relBytes
		l.mu.Unlock()
		if rel == 0 || sum <= 0 || relBytes != sum {
			t.Fatalf("%d released flights, backlog %d bytes, their objects %d bytes", rel, relBytes, sum)
		}
		if held == 0 {
			break
		}
		if try == 500 {
			t.Fatalf("%d of %d released, uploaded flights still hold their rendered object", held, rel)
		}
		time.Sleep(10 * time.Millisecond)
	}
	recs, low, err := s.ReadIndex(id, 0, 100, 1<<20)
	if err != nil || low != 0 || len(recs) != 50 || string(recs[49].Body) != "r49" {
		t.Fatalf("flight index: %d records from %d, %v", len(recs), low, err)
	}
}

// BenchmarkDedupeMemory measures one stream's producer table at its bound:
// MaxProducers producers, each remembering DedupeWindow committed batches
// (the defaults: 4096 and 8). It reports the bytes per producer and the
// table's largest size; the star holds one such table per stream that an
// idempotent producer appends to, all of them together bounded by
// StarMaxProducers (BenchmarkDedupeStarBound; docs/performance/many-streams.md, "Many
// streams").
//
//	go test ./shared/star -run '^$' -bench DedupeMemory -benchtime 1x
func BenchmarkDedupeMemory(b *testing.B) {
	for range b.N {
		h0 := heapInuse()
		d := newDedupe(DefaultDedupeWindow, DefaultProducerIdle, DefaultMaxProducers, newProducerLRU(DefaultMaxProducers))
		for p := range DefaultMaxProducers {
			var id format.ProducerID
			binary.BigEndian.PutUint64(id[8:], uint64(p)+1)
			for seq := range uint64(DefaultDedupeWindow + 2) { // the ring slides
				bt := &batch{producer: id, batchSeq: seq}
				d.admit(id, seq, bt, 0)
				d.released(bt, Ack{FirstSeq: seq, LastSeq: seq})
			}
		}
		h1 := heapInuse()
		if len(d.ps) != DefaultMaxProducers {
			b.Fatalf("%d producers remembered, want %d", len(d.ps), DefaultMaxProducers)
		}
		for _, p := range d.ps {
			if len(p.ring) != DefaultDedupeWindow {
				b.Fatalf("producer remembers %d batches, want %d", len(p.ring), DefaultDedupeWindow)
			}
		}
		per := float64(h1-h0) / DefaultMaxProducers
		b.ReportMetric(per, "B/producer")
		b.ReportMetric(per*DefaultMaxProducers/(1<<20), "MiB/stream-at-bound")
		runtime.KeepAlive(d)
	}
}

// BenchmarkDedupeStarBound measures the star's dedupe memory at its
// star-wide bound: 100,000 streams, each with producers appending full
// windows (DefaultDedupeWindow committed batches) until 2 x
// DefaultStarMaxProducers producers have appended, so the bound has
// forgotten half of them. It reports the producers remembered (the bound),
// the heap they hold (every table, producer and window of the star) and
// the bytes per producer; the star's dedupe memory is at most that, at any
// stream count (docs/performance/many-streams.md, "Many streams").
//
//	go test ./shared/star -run '^$' -bench DedupeStarBound -benchtime 1x
func BenchmarkDedupeStarBound(b *testing.B) {
	const streams = 100_000
	for range b.N {
		h0 := heapInuse()
		u := newProducerLRU(DefaultStarMaxProducers)
		tables := make([]*dedupe, streams)
		for i := range tables {
			tables[i] = newDedupe(DefaultDedupeWindow, DefaultProducerIdle, DefaultMaxProducers, u)
		}
		for p := range 2 * DefaultStarMaxProducers {
			var id format.ProducerID
			binary.BigEndian.PutUint64(id[8:], uint64(p)+1)
			d := tables[p%streams]
			for seq := range uint64(DefaultDedupeWindow) {
				bt := &batch{producer: id, batchSeq: seq}
				d.admit(id, seq, bt, 0)
				d.released(bt, Ack{FirstSeq: seq, LastSeq: seq})
			}
		}
		h1 := heapInuse()
		n := 0
		for _, d := range tables {
			n += len(d.ps)
		}
		if n != DefaultStarMaxProducers || u.n != n {
			b.Fatalf("%d producers remembered (counted %d), want the bound %d", n, u.n, DefaultStarMaxProducers)
		}
		b.ReportMetric(float64(n), "producers")
		b.ReportMetric(float64(h1-h0)/(1<<20), "MiB-at-bound")
		b.ReportMetric(float64(h1-h0)/float64(n), "B/producer")
		runtime.KeepAlive(tables)
	}
}
