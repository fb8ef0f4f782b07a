package star

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// npid is producer number i (1-based in its first bytes, so never zero).
func npid(i int) format.ProducerID {
	var p format.ProducerID
	binary.BigEndian.PutUint64(p[:8], uint64(i)+1)
	return p
}

// commit admits and releases one batch of producer id on d.
func commit(d *dedupe, id format.ProducerID, seq uint64, nowMs int64) {
	b := &batch{producer: id, batchSeq: seq}
	if v := d.check(id, seq, nowMs); v.err != nil || v.dup != nil {
		panic(fmt.Sprintf("producer %x seq %d: %+v", id[:8], seq, v))
	}
	d.admit(id, seq, b, nowMs)
	d.released(b, Ack{FirstSeq: seq, LastSeq: seq})
}

// audit checks the star-wide count against the tables and the list, and
// returns the remembered producers.
func audit(t *testing.T, u *producerLRU, tables []*dedupe) map[format.ProducerID]bool {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	got := map[format.ProducerID]bool{}
	listed := 0
	for _, d := range tables {
		for id, p := range d.ps {
			if p.d != d || p.id != id {
				t.Fatalf("producer %x: table link wrong", id[:8])
			}
			got[id] = true
			if p.prev != nil {
				listed++
			} else if !p.inflight() {
				t.Fatalf("producer %x has nothing in flight but is not forgettable (off the list)", id[:8])
			}
		}
	}
	if len(got) != u.n {
		t.Fatalf("the tables hold %d producers, the star counts %d", len(got), u.n)
	}
	n, counted := 0, 0
	for tenant, sh := range u.tenants {
		for p := sh.list.next; p != &sh.list; p = p.next {
			if p.next.prev != p || p.tenant != tenant {
				t.Fatal("list links broken")
			}
			n++
		}
		counted += sh.n
	}
	if counted != u.n {
		t.Fatalf("the tenants' shares count %d producers, the star %d", counted, u.n)
	}
	if n != listed {
		t.Fatalf("the list holds %d producers, the tables %d forgettable ones", n, listed)
	}
	return got
}

// TestDedupeStarBoundManyStreams: 200 streams x 50 producers each, 3
// batches apiece, under a star-wide bound of 500 producers: the star never
// remembers more than 500 (the tables' producers and their windows are
// counted after every batch), and the ones it remembers are exactly the
// 500 most recently used, across streams.
func TestDedupeStarBoundManyStreams(t *testing.T) {
	const streams, per, bound, window = 200, 50, 500, 4
	u := newProducerLRU(bound)
	tables := make([]*dedupe, streams)
	for i := range tables {
		tables[i] = newDedupe(window, DefaultProducerIdle, DefaultMaxProducers, u)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	order := rng.Perm(streams * per) // producer k appends to stream k%streams
	var recent []int
	for step, k := range order {
		d := tables[k%streams]
		for seq := range uint64(3) {
			commit(d, npid(k), seq, int64(step))
		}
		recent = append(recent, k)
		entries := 0
		u.mu.Lock()
		for _, d := range tables {
			for _, p := range d.ps {
				entries += len(p.ring)
			}
		}
		n := u.n
		u.mu.Unlock()
		if n > bound || entries > bound*window {
			t.Fatalf("after %d producers the star remembers %d producers, %d batches: bound %d", step+1, n, entries, bound)
		}
	}
	got := audit(t, u, tables)
	if len(got) != bound {
		t.Fatalf("%d remembered, want %d", len(got), bound)
	}
	for _, k := range recent[len(recent)-bound:] {
		if !got[npid(k)] {
			t.Fatalf("producer %d, among the %d most recently used, was forgotten", k, bound)
		}
	}
	_, _, _, star := func() (int, uint64, uint64, uint64) {
		u.mu.Lock()
		defer u.mu.Unlock()
		return u.n, u.forgot[forgotIdle], u.forgot[forgotStream], u.forgot[forgotStar]
	}()
	if star != streams*per-bound {
		t.Fatalf("%d forgotten by the star's bound, want %d", star, streams*per-bound)
	}
}

// TestDedupeStarEvictionOrder: the star forgets its least recently used
// producer whatever its stream; a retry answered from the window counts as
// use; a producer with a batch in flight is never forgotten (the excess is
// forgotten when its batch is released).
func TestDedupeStarEvictionOrder(t *testing.T) {
	u := newProducerLRU(3)
	a, b, c := newDedupe(4, DefaultProducerIdle, 100, u), newDedupe(4, DefaultProducerIdle, 100, u), newDedupe(4, DefaultProducerIdle, 100, u)
	tables := []*dedupe{a, b, c}
	commit(a, npid(1), 0, 1) // used in the order 1 (a), 2 (b), 3 (c)
	commit(b, npid(2), 0, 2)
	commit(c, npid(3), 0, 3)
	// A retry of 1's batch answered from the window: 1 is now the most
	// recent, 2 the least.
	if v := a.check(npid(1), 0, 4); v.dup == nil || v.dup.b != nil {
		t.Fatalf("retry: %+v", v)
	}
	commit(c, npid(4), 0, 5) // stream c, forgets 2 in stream b
	got := audit(t, u, tables)
	if got[npid(2)] || !got[npid(1)] || !got[npid(3)] || !got[npid(4)] {
		t.Fatalf("remembered %v, want 1, 3, 4", got)
	}
	// 3 has a batch in flight: 1 is forgotten, not 3, though 3 is older.
	p3 := &batch{producer: npid(3), batchSeq: 1}
	c.admit(npid(3), 1, p3, 6)
	commit(a, npid(1), 1, 7) // 1 used again: order (old to new) 4, 1; 3 in flight
	commit(b, npid(5), 0, 8) // forgets 4
	got = audit(t, u, tables)
	if got[npid(4)] || !got[npid(3)] || !got[npid(1)] || !got[npid(5)] {
		t.Fatalf("remembered %v, want 1, 3 (in flight), 5", got)
	}
	// Everything in flight: a new producer is remembered past the bound,
	// and the excess goes as soon as one is released.
	p1 := &batch{producer: npid(1), batchSeq: 2}
	a.admit(npid(1), 2, p1, 9)
	p5 := &batch{producer: npid(5), batchSeq: 1}
	b.admit(npid(5), 1, p5, 9)
	p6 := &batch{producer: npid(6), batchSeq: 0}
	a.admit(npid(6), 0, p6, 10)
	if got = audit(t, u, tables); len(got) != 4 {
		t.Fatalf("remembered %d with all four in flight, want 4", len(got))
	}
	a.released(p1, Ack{FirstSeq: 9, LastSeq: 9}) // 1 is now forgettable and the star is over: forgotten
	if got = audit(t, u, tables); len(got) != 3 || got[npid(1)] {
		t.Fatalf("after the release remembered %v, want 3, 5, 6", got)
	}
	for _, x := range []struct {
		d *dedupe
		b *batch
	}{{c, p3}, {b, p5}, {a, p6}} {
		x.d.released(x.b, Ack{})
	}
	if got = audit(t, u, tables); len(got) != 3 {
		t.Fatalf("remembered %d, want 3", len(got))
	}
	// A stream leaving the star takes its producers off the count.
	a.drop()
	if got = audit(t, u, []*dedupe{b, c}); len(got) != 2 {
		t.Fatalf("after the drop remembered %d, want 2", len(got))
	}
}

// TestDedupeStarBoundSeeding: tables seeded after a takeover stay within
// the star's bound, the latest seeded kept.
func TestDedupeStarBoundSeeding(t *testing.T) {
	const bound = 20
	u := newProducerLRU(bound)
	var tables []*dedupe
	var last []format.ProducerID
	for s := range 10 {
		d := newDedupe(4, DefaultProducerIdle, DefaultMaxProducers, u)
		tables = append(tables, d)
		var states []ProducerState
		for k := range 5 {
			id := npid(s*5 + k)
			states = append(states, ProducerState{ID: id, LastMs: 100, Batches: []BatchMark{{BatchSeq: 7, FirstSeq: 1, LastSeq: 2}}})
			last = append(last, id)
		}
		d.seed(states, 100)
		if got := audit(t, u, tables); len(got) > bound {
			t.Fatalf("after seeding %d streams the star remembers %d, bound %d", s+1, len(got), bound)
		}
	}
	got := audit(t, u, tables)
	for _, id := range last[len(last)-bound:] {
		if !got[id] {
			t.Fatalf("producer %x, among the last %d seeded, was forgotten", id[:8], bound)
		}
	}
	if len(got) != bound {
		t.Fatalf("remembered %d, want %d", len(got), bound)
	}
}

// twoClasses is a harness option adding an Express loglet beside the
// Standard one (two loglets, two locks, one bound).
func twoClasses(c *Config, _ *Options) {
	c.Express = ClassConfig{Buckets: []objstore.Bucket{objstore.NewMem("x0")}, W: 1, MemoryBufferMiB: 8, ParallelUploads: 8,
		FlushDeadline: 2 * time.Millisecond, FlightKiB: 64, CommitDeadline: 5 * time.Second}
}

// TestForgottenProducerAsPerStreamCap: a producer forgotten under the
// star-wide bound behaves exactly as one forgotten under a stream's own
// bound (ADR 0041): it is unknown, so a retry of its acknowledged batch is
// admitted afresh (new seqs) and it may start at any batch seq; a
// remembered producer's retry still gets its original ack. Both bounds are
// driven through the star, and must give the same answers.
func TestForgottenProducerAsPerStreamCap(t *testing.T) {
	ctx := context.Background()
	type answer struct {
		written bool  // the stream's tail moved: the batch was written
		err     error // nil, or the dedupe error
	}
	run := func(t *testing.T, starWide bool) []answer {
		h := newHarness(t, metastore.Standard, 1, 1, func(c *Config, _ *Options) {
			if starWide {
				c.StarMaxProducers = 2
			} else {
				c.MaxProducers = 2
			}
		})
		h.start()
		ids := h.open(metastore.Standard, 3)
		var out []answer
		app := func(i, p int, seq uint64) {
			id := ids[0] // one stream (its own bound) or three (the star's)
			if starWide {
				id = ids[i]
			}
			before, _, _ := h.star.Tail(id)
			_, err := h.star.Append(ctx, id, recs(1, nil2), AppendOptions{Producer: npid(p), BatchSeq: seq})
			after, _, _ := h.star.Tail(id)
			out = append(out, answer{after > before, err})
			time.Sleep(3 * time.Millisecond) // distinct admission times for the stream's own LRU
		}
		app(0, 1, 0)
		app(1, 2, 0)
		app(1, 2, 0)  // a retry, remembered: the original ack
		app(2, 3, 0)  // forgets producer 1 (least recently used)
		app(0, 1, 0)  // 1's retry: admitted afresh (written again), forgets 2
		app(1, 2, 5)  // 2 forgotten: starts at any seq; forgets 3
		app(2, 3, 9)  // 3 forgotten: starts at any seq; forgets 1
		app(2, 3, 9)  // a retry, remembered
		app(0, 1, 0)  // 1 forgotten: written again; forgets 2
		app(2, 3, 11) // 3 remembered at 9: a gap
		app(0, 1, 3)  // 1 remembered at 0: a gap
		app(2, 3, 2)  // below 3's window: too old
		if starWide {
			if n, _, _, star := h.star.Producers(); n != 2 || star != 5 {
				t.Fatalf("star remembers %d producers (%d forgotten by its bound), want 2 (5)", n, star)
			}
		}
		return out
	}
	want := []answer{{true, nil}, {true, nil}, {false, nil}, {true, nil}, {true, nil}, {true, nil}, {true, nil},
		{false, nil}, {true, nil}, {false, ErrBatchSeqGap}, {false, ErrBatchSeqGap}, {false, ErrBatchSeqTooOld}}
	for _, starWide := range []bool{false, true} {
		got := run(t, starWide)
		for i := range want {
			if got[i].written != want[i].written || !errors.Is(got[i].err, want[i].err) || (want[i].err == nil) != (got[i].err == nil) {
				t.Fatalf("star-wide %v: answer %d is %+v, want %+v", starWide, i, got[i], want[i])
			}
		}
	}
}

// TestInFlightProducerNotForgottenByStar: a producer whose batch is in
// flight is never forgotten under the star-wide bound, so its retry waits
// for the original and gets its ack: the batch is written once.
func TestInFlightProducerNotForgottenByStar(t *testing.T) {
	h, g, id := gatedStream(t)
	h.star.lru.max = 1 // the harness built the star; tighten its bound
	ctx := context.Background()
	first, err := h.star.Submit(ctx, id, recs(2, nil2), AppendOptions{Producer: npid(1), BatchSeq: 0})
	if err != nil {
		t.Fatal(err)
	}
	// Other producers of other streams arrive (all in flight behind the gate).
	if err := h.star.Open(StreamInfo{ID: sid(1), Class: metastore.Standard}); err != nil {
		t.Fatal(err)
	}
	var others []*Pending
	for p := 2; p < 6; p++ {
		pe, err := h.star.Submit(ctx, sid(1), recs(1, nil2), AppendOptions{Producer: npid(p), BatchSeq: 0})
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, pe)
	}
	if n, _, _, _ := h.star.Producers(); n != 5 {
		t.Fatalf("remembered %d with five in flight, want 5 (in flight is never forgotten)", n)
	}
	retried := make(chan answerOf, 1)
	go func() {
		a, err := h.star.Append(ctx, id, recs(2, nil2), AppendOptions{Producer: npid(1), BatchSeq: 0})
		retried <- answerOf{a, err}
	}()
	time.Sleep(20 * time.Millisecond)
	close(g.open)
	a0, err := first.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := <-retried; r.err != nil || r.a.FirstSeq != a0.FirstSeq || r.a.LastSeq != a0.LastSeq {
		t.Fatalf("retry %+v %v, original %+v", r.a, r.err, a0)
	}
	for _, pe := range others {
		if _, err := pe.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if next, _, _ := h.star.Tail(id); next != 2 {
		t.Fatalf("tail %d: the in-flight producer's retry was written again", next)
	}
	if n, _, _, _ := h.star.Producers(); n != 1 {
		t.Fatalf("remembered %d once everything was released, want the bound, 1", n)
	}
}

type answerOf struct {
	a   Ack
	err error
}

// TestDedupeStarBoundConcurrent: producers on many streams of both
// classes (two loglets, so evictions cross loglet locks) append and retry
// concurrently under a small star-wide bound (run with -race). Every
// append and retry is acknowledged, and once all is released the star
// remembers at most the bound, its count matching its tables and list.
func TestDedupeStarBoundConcurrent(t *testing.T) {
	const streams, workers, batches, bound = 32, 8, 40, 12
	h := newHarness(t, metastore.Standard, 1, 1, twoClasses, func(c *Config, _ *Options) { c.StarMaxProducers = bound })
	h.start()
	var ids []format.StreamID
	for i := range streams {
		class := metastore.Standard
		if i%2 == 1 {
			class = metastore.Express
		}
		if err := h.star.Open(StreamInfo{ID: sid(i), Class: class}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sid(i))
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for n := range batches {
				p := npid(w*1000 + n) // a fresh producer per batch: maximum churn
				id := ids[rng.IntN(streams)]
				pe, err := h.star.Submit(ctx, id, recs(1, nil2), AppendOptions{Producer: p, BatchSeq: 0})
				if err != nil {
					errs <- err
					return
				}
				// The retry races the original's release.
				// (If the producer was forgotten before the retry came, the
				// retry is written again: ADR 0041.)
				_, rerr := h.star.Append(ctx, id, recs(1, nil2), AppendOptions{Producer: p, BatchSeq: 0})
				if _, err := pe.Wait(ctx); err != nil || rerr != nil {
					errs <- fmt.Errorf("append %v, retry %v", err, rerr)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n, _, _, star := h.star.Producers()
	if n > bound || star == 0 {
		t.Fatalf("star remembers %d producers (bound %d), %d forgotten by the bound", n, bound, star)
	}
	h.star.mu.RLock()
	var tables []*dedupe
	for _, st := range h.star.streams {
		st.l.mu.Lock()
		if st.dd != nil {
			tables = append(tables, st.dd)
		}
		st.l.mu.Unlock()
	}
	h.star.mu.RUnlock()
	if got := audit(t, h.star.lru, tables); len(got) != n {
		t.Fatalf("audit %d, Producers %d", len(got), n)
	}
}

// TestStarBoundRegression: 2,000 streams with one idempotent producer
// each, the star's bound at 100. Without a star-wide bound (each stream
// bounded only by its own 4,096) the star remembered all 2,000.
func TestStarBoundRegression(t *testing.T) {
	h := newHarness(t, metastore.Express, 1, 1, func(c *Config, _ *Options) { c.StarMaxProducers = 100 })
	h.start()
	ctx := context.Background()
	ids := h.open(metastore.Express, 2000)
	var pend []*Pending
	for i, id := range ids {
		pe, err := h.star.Submit(ctx, id, recs(1, nil2), AppendOptions{Producer: npid(i), BatchSeq: 0})
		if err != nil {
			t.Fatal(err)
		}
		pend = append(pend, pe)
	}
	for _, pe := range pend {
		if _, err := pe.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, _, _, _ := h.star.Producers(); n > 100 {
		t.Fatalf("the star remembers %d producers over 2,000 streams, bound 100", n)
	}
	// The metric says the same.
	if got := h.star.Metrics().Counter("strand_dedupe_forgotten_total", "", "cause", "star").Value(); got < 1900 {
		t.Fatalf("strand_dedupe_forgotten_total{cause=star} %d, want at least 1,900", got)
	}
}

// TestOpenSeedsWithinStarBound: streams opened with recovered producer
// states (a successor after takeover) seed their tables within the star's
// bound: the latest seeded producers answer retries with their original
// acks, the earlier ones were forgotten and are admitted afresh.
func TestOpenSeedsWithinStarBound(t *testing.T) {
	h := newHarness(t, metastore.Standard, 1, 1, func(c *Config, _ *Options) { c.StarMaxProducers = 3 })
	h.start()
	now := time.Now().UnixMilli()
	for i := range 6 { // stream i, producer i, its batch 4 at seqs 95..99
		if err := h.star.Open(StreamInfo{ID: sid(i), Class: metastore.Standard, Next: 100,
			Producers: []ProducerState{{ID: npid(i), LastMs: now, Batches: []BatchMark{{BatchSeq: 4, FirstSeq: 95, LastSeq: 99}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if n, _, _, star := h.star.Producers(); n != 3 || star != 3 {
		t.Fatalf("seeding 6 producers under a bound of 3 left %d remembered, %d forgotten", n, star)
	}
	ctx := context.Background()
	for _, i := range []int{3, 4, 5, 0, 1, 2} { // the kept first: the others, new again, forget producers
		a, err := h.star.Append(ctx, sid(i), recs(1, nil2), AppendOptions{Producer: npid(i), BatchSeq: 4})
		if err != nil {
			t.Fatal(err)
		}
		if kept := i >= 3; kept != (a.FirstSeq == 95 && a.LastSeq == 99) {
			t.Fatalf("stream %d (producer seeded %s): retry answered %d..%d", i, map[bool]string{true: "last", false: "first"}[kept], a.FirstSeq, a.LastSeq)
		}
	}
}

// TestDedupeTenantShare (issue 31 finding 10): a tenant that brings many
// producers past the star's bound forgets its own least recently used
// ones, never a smaller tenant's: the victim's retry of an acknowledged
// batch is still answered from its window.
func TestDedupeTenantShare(t *testing.T) {
	const bound = 8
	u := newProducerLRU(bound)
	victim := newDedupe(4, time.Hour, 1000, u)
	flood := newDedupe(4, time.Hour, 1000, u)
	commitAs := func(d *dedupe, tenant string, id format.ProducerID, seq uint64, nowMs int64) {
		b := &batch{producer: id, batchSeq: seq, tenant: tenant}
		if v := d.check(id, seq, nowMs); v.err != nil || v.dup != nil {
			t.Fatalf("producer %x seq %d: %+v", id[:8], seq, v)
		}
		d.admit(id, seq, b, nowMs)
		d.released(b, Ack{FirstSeq: seq, LastSeq: seq})
	}
	for i := range 2 {
		commitAs(victim, "victim", npid(i), 0, 1)
	}
	for i := range 100 {
		commitAs(flood, "flood", npid(1000+i), 0, int64(2+i))
	}
	got := audit(t, u, []*dedupe{victim, flood})
	if len(got) != bound {
		t.Fatalf("the star remembers %d producers, want its bound %d", len(got), bound)
	}
	for i := range 2 {
		if v := victim.check(npid(i), 0, 200); v.dup == nil {
			t.Errorf("the victim's producer %d was forgotten by another tenant's traffic: its retry would be written twice", i)
		}
	}
	// The flood's most recent producers are the ones it keeps.
	for i := 94; i < 100; i++ {
		if !got[npid(1000+i)] {
			t.Errorf("the flood's recent producer %d was forgotten before its older ones", i)
		}
	}
}
