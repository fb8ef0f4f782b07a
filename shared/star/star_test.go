package star

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

type seededReader struct{ r *rand.Rand }

func (s seededReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(s.r.Uint32())
	}
	return len(p), nil
}

type harness struct {
	t       *testing.T
	star    *Star
	meta    metastore.Store
	mems    []*objstore.Mem
	inj     []*objstore.Injector
	buckets []objstore.Bucket
}

type harnessOpt func(*Config, *Options)

// newHarness builds a star with one class on K memory buckets behind fault
// injectors.
func newHarness(t *testing.T, class metastore.Class, k, w int, opts ...harnessOpt) *harness {
	t.Helper()
	h := &harness{t: t, meta: metastore.NewMem()}
	for i := 0; i < k; i++ {
		m := objstore.NewMem(fmt.Sprintf("b%d", i))
		inj := objstore.NewInjector(int64(i + 1))
		h.mems = append(h.mems, m)
		h.inj = append(h.inj, inj)
		h.buckets = append(h.buckets, objstore.WithFaults(m, inj))
	}
	cfg := Defaults()
	cc := ClassConfig{Buckets: h.buckets, W: w, MemoryBufferMiB: 8, ParallelUploads: 8,
		FlushDeadline: 2 * time.Millisecond, FlightKiB: 64, CommitDeadline: 5 * time.Second}
	if class == metastore.Express {
		cfg.Express = cc
		cfg.Standard = ClassConfig{}
	} else {
		cfg.Standard = cc
		cfg.Express = ClassConfig{}
	}
	cfg.Rand = seededReader{rand.New(rand.NewPCG(1, 2))}
	var o Options
	for _, f := range opts {
		f(&cfg, &o)
	}
	s, err := New(cfg, h.meta, o)
	if err != nil {
		t.Fatal(err)
	}
	h.star = s
	return h
}

func (h *harness) start() {
	h.t.Helper()
	if err := h.star.Start(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(h.star.Close)
}

func sid(i int) format.StreamID {
	var id format.StreamID
	binary.BigEndian.PutUint64(id[8:], uint64(i)+1)
	return id
}

func (h *harness) open(class metastore.Class, n int) []format.StreamID {
	var ids []format.StreamID
	for i := 0; i < n; i++ {
		id := sid(i)
		if err := h.star.Open(StreamInfo{ID: id, Class: class}); err != nil {
			h.t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

func body(stream, producer, n int) []byte {
	return fmt.Appendf(nil, "s%d-p%d-n%d", stream, producer, n)
}

func recs(n int, mk func(i int) []byte) []format.Record {
	out := make([]format.Record, n)
	for i := range out {
		out[i] = format.Record{Body: mk(i)}
	}
	return out
}

// chainRecords reads the chain of epoch from slot 0 while slots exist (in
// bucket 0..K-1, first copy found) and returns each stream's records in seq
// order, checking contiguity.
func (h *harness) chainRecords(star string, epoch uint64) map[format.StreamID][]string {
	h.t.Helper()
	out := map[format.StreamID][]string{}
	next := map[format.StreamID]uint64{}
	for slot := uint64(0); ; slot++ {
		var obj []byte
		for _, m := range h.mems {
			if b, err := m.Get(context.Background(), format.SlotKey(star, epoch, slot), 0, -1); err == nil {
				obj = b
				break
			}
		}
		if obj == nil {
			return out
		}
		f, err := format.ParseFlight(obj)
		if err != nil {
			h.t.Fatalf("slot %d: %v", slot, err)
		}
		for _, e := range f.Entries {
			if e.FirstSeq != next[e.Stream] {
				h.t.Fatalf("slot %d stream %s starts at seq %d, want %d", slot, e.Stream, e.FirstSeq, next[e.Stream])
			}
			_, rs, err := format.DecodeSegment(obj[e.Offset : e.Offset+e.Length])
			if err != nil {
				h.t.Fatal(err)
			}
			for _, r := range rs {
				out[e.Stream] = append(out[e.Stream], string(r.Body))
			}
			next[e.Stream] += uint64(e.Count)
		}
	}
}

// TestAcksInOrderUnderRandomLatency: many producers on several streams,
// every bucket with random latency, so PUTs complete out of order. Every
// stream's acks are contiguous and in admission order, flights release in
// slot order, and the chain holds exactly the acked records.
func TestAcksInOrderUnderRandomLatency(t *testing.T) {
	h := newHarness(t, metastore.Express, 3, 2)
	for _, in := range h.inj {
		if err := in.SetLatency(200*time.Microsecond, 4*time.Millisecond, objstore.OpPut); err != nil {
			t.Fatal(err)
		}
	}
	h.start()
	ids := h.open(metastore.Express, 4)
	const producers, batches = 6, 60
	type acked struct {
		first, last uint64
		bodies      []string
	}
	var mu sync.Mutex
	got := map[format.StreamID][]acked{}
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < batches; n++ {
				si := (p + n) % len(ids)
				rs := recs(1+n%5, func(i int) []byte { return body(si, p, n*10+i) })
				a, err := h.star.Append(context.Background(), ids[si], rs, AppendOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				if a.LastSeq-a.FirstSeq+1 != uint64(len(rs)) || a.Tail < a.LastSeq+1 {
					t.Errorf("ack %+v for %d records", a, len(rs))
				}
				var bs []string
				for _, r := range rs {
					bs = append(bs, string(r.Body))
				}
				mu.Lock()
				got[ids[si]] = append(got[ids[si]], acked{a.FirstSeq, a.LastSeq, bs})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	chain := h.chainRecords("star-0", 1)
	total := 0
	for _, id := range ids {
		as := got[id]
		slices.SortFunc(as, func(a, b acked) int { return int(a.first) - int(b.first) })
		var want []string
		next := uint64(0)
		for _, a := range as {
			if a.first != next {
				t.Fatalf("stream %s: acked range starts at %d, want %d (gap or overlap)", id, a.first, next)
			}
			next = a.last + 1
			want = append(want, a.bodies...)
		}
		if !slices.Equal(chain[id], want) {
			t.Fatalf("stream %s: chain holds %d records, acked %d, or order differs", id, len(chain[id]), len(want))
		}
		total += len(want)
		tail, _, err := h.star.Tail(id)
		if err != nil || tail != next {
			t.Fatalf("tail %d, want %d (%v)", tail, next, err)
		}
	}
	// Flights released in slot order, with no gap.
	l := h.star.loglets[metastore.Express]
	l.mu.Lock()
	for i, f := range l.released {
		if f.slot != uint64(i) {
			t.Fatalf("flight index position %d holds slot %d", i, f.slot)
		}
	}
	l.mu.Unlock()
	if total == 0 {
		t.Fatal("nothing acked")
	}
}

func TestMatchSeqMissRejectsOnlyThatBatch(t *testing.T) {
	h := newHarness(t, metastore.Standard, 1, 1)
	h.start()
	id := h.open(metastore.Standard, 1)[0]
	ctx := context.Background()
	zero := uint64(0)
	a, err := h.star.Append(ctx, id, recs(3, func(i int) []byte { return []byte("a") }), AppendOptions{MatchSeq: &zero})
	if err != nil || a.FirstSeq != 0 || a.LastSeq != 2 || a.Tail != 3 {
		t.Fatal(a, err)
	}
	stale := uint64(1)
	_, err = h.star.Append(ctx, id, recs(1, func(int) []byte { return []byte("x") }), AppendOptions{MatchSeq: &stale})
	var mm *SeqMismatchError
	if !errors.As(err, &mm) || mm.Tail != 3 || mm.Expected != 1 {
		t.Fatalf("got %v, want a mismatch reporting tail 3", err)
	}
	three := uint64(3)
	a, err = h.star.Append(ctx, id, recs(2, func(int) []byte { return []byte("b") }), AppendOptions{MatchSeq: &three})
	if err != nil || a.FirstSeq != 3 || a.LastSeq != 4 {
		t.Fatal(a, err)
	}
	if got := h.chainRecords("star-0", 1)[id]; strings.Join(got, "") != "aaabb" {
		t.Fatalf("chain holds %q", got)
	}
}

func TestBadBatches(t *testing.T) {
	h := newHarness(t, metastore.Standard, 1, 1)
	h.start()
	id := h.open(metastore.Standard, 1)[0]
	ctx := context.Background()
	if _, err := h.star.Append(ctx, id, nil, AppendOptions{}); !errors.Is(err, format.ErrEmptyBatch) {
		t.Fatal(err)
	}
	if _, err := h.star.Append(ctx, id, make([]format.Record, 1001), AppendOptions{}); !errors.Is(err, format.ErrBatchTooLarge) {
		t.Fatal(err)
	}
	if _, err := h.star.Append(ctx, sid(99), recs(1, func(int) []byte { return nil }), AppendOptions{}); !errors.Is(err, ErrUnknownStream) {
		t.Fatal(err)
	}
	if tail, _, _ := h.star.Tail(id); tail != 0 {
		t.Fatalf("rejected batches moved the tail to %d", tail)
	}
}

func TestOneBucketDownOrSlowKeepsAcking(t *testing.T) {
	for _, mode := range []string{"down", "slow"} {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t, metastore.Express, 3, 2)
			for _, in := range h.inj {
				in.SetLatency(time.Millisecond, 2*time.Millisecond, objstore.OpPut)
			}
			if mode == "down" {
				h.inj[1].SetDown(true)
			} else {
				h.inj[1].SetLatency(100*time.Millisecond, 200*time.Millisecond, objstore.OpPut)
			}
			// The start-up probe needs every bucket; take it down after.
			h.inj[1].SetDown(false)
			h.start()
			if mode == "down" {
				h.inj[1].SetDown(true)
			}
			id := h.open(metastore.Express, 1)[0]
			start := time.Now()
			for n := 0; n < 20; n++ {
				if _, err := h.star.Append(context.Background(), id, recs(2, func(int) []byte { return []byte("r") }), AppendOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			// 20 sequential appends at the 2nd-fastest bucket's pace: far
			// below 20 x 100ms if the slow bucket were on the ack path.
			if d := time.Since(start); d > 1500*time.Millisecond {
				t.Fatalf("20 appends took %s: the slow or down bucket is on the ack path", d)
			}
			if h.star.loglets[metastore.Express].m.halts.Value() != 0 {
				t.Fatal("halted")
			}
		})
	}
}

func TestTwoBucketsDownHaltsAfterDeadline(t *testing.T) {
	h := newHarness(t, metastore.Express, 3, 2, func(c *Config, _ *Options) { c.Express.CommitDeadline = 150 * time.Millisecond })
	h.start()
	h.inj[0].SetDown(true)
	h.inj[2].SetDown(true)
	id := h.open(metastore.Express, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	_, err := h.star.Append(ctx, id, recs(1, func(int) []byte { return []byte("x") }), AppendOptions{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("append with W unreachable returned %v, want no ack (deadline)", err)
	}
	l := h.star.loglets[metastore.Express]
	l.mu.Lock()
	halted := l.halted
	l.mu.Unlock()
	if halted == nil || !errors.Is(halted, ErrQuorumDeadline) {
		t.Fatalf("halt reason %v, want ErrQuorumDeadline", halted)
	}
	if tail, _, _ := h.star.Tail(id); tail != 0 {
		t.Fatalf("acked tail %d with two buckets down", tail)
	}
}

func TestGhostPutResolvedByReadingBack(t *testing.T) {
	h := newHarness(t, metastore.Express, 3, 2)
	h.start()
	// Every bucket's next put lands but its answer is lost; then one bucket
	// loses a put that did not land.
	for _, in := range h.inj {
		in.ForceAmbiguous(1, true)
	}
	id := h.open(metastore.Express, 1)[0]
	a, err := h.star.Append(context.Background(), id, recs(3, func(int) []byte { return []byte("g") }), AppendOptions{})
	if err != nil || a.LastSeq != 2 {
		t.Fatal(a, err)
	}
	h.inj[0].ForceAmbiguous(1, false)
	h.inj[1].ForceAmbiguous(1, false)
	a, err = h.star.Append(context.Background(), id, recs(1, func(int) []byte { return []byte("h") }), AppendOptions{})
	if err != nil || a.FirstSeq != 3 {
		t.Fatal(a, err)
	}
	if got := h.chainRecords("star-0", 1)[id]; strings.Join(got, "") != "gggh" {
		t.Fatalf("chain holds %q", got)
	}
	if h.star.loglets[metastore.Express].m.halts.Value() != 0 {
		t.Fatal("an ambiguous put of our own write halted the epoch")
	}
}

// gate blocks every PutIfAbsent until opened.
type gate struct {
	objstore.Bucket
	open chan struct{}
}

func (g *gate) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	if strings.HasPrefix(key, "chains/") {
		select {
		case <-g.open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Bucket.PutIfAbsent(ctx, key, body)
}

func TestAdmissionBlocksAtBudgetAndResumes(t *testing.T) {
	g := &gate{Bucket: objstore.NewMem("gated"), open: make(chan struct{})}
	h := newHarness(t, metastore.Standard, 1, 1, func(c *Config, _ *Options) {
		c.Standard.Buckets = []objstore.Bucket{g}
		c.Standard.MemoryBufferMiB = 1
		c.Standard.ParallelUploads = 1
		c.Standard.FlightKiB = 256
	})
	h.start()
	id := h.open(metastore.Standard, 1)[0]
	big := func() []format.Record { return []format.Record{{Body: make([]byte, 200<<10)}} }
	var pend []*Pending
	// One flight is cut and stuck at the gate (window 1); the pool then
	// takes batches up to its 1 MiB budget.
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		p, err := h.star.Submit(ctx, id, big(), AppendOptions{})
		cancel()
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatal(err)
			}
			if i < 5 || i > 7 {
				t.Fatalf("admission blocked after %d batches of 200 KiB with a 1 MiB pool", i)
			}
			break
		}
		pend = append(pend, p)
	}
	l := h.star.loglets[metastore.Standard]
	l.mu.Lock()
	pb := l.pool.bytes
	l.mu.Unlock()
	if pb > 1<<20 {
		t.Fatalf("pool holds %d bytes over its 1 MiB budget", pb)
	}
	close(g.open)
	// Admission resumes, and everything admitted is acked in order.
	p, err := h.star.Submit(context.Background(), id, big(), AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pend = append(pend, p)
	for i, p := range pend {
		a, err := p.Wait(context.Background())
		if err != nil || a.FirstSeq != uint64(i) {
			t.Fatalf("batch %d: %+v %v", i, a, err)
		}
	}
}

// noMeta is a metastore with no implementation: any call panics, which
// crashes the test binary. Installed after Start, it proves the write path
// never calls the metastore.
type noMeta struct{ metastore.Store }

func TestNoMetastoreCallsBetweenAdmissionAndAck(t *testing.T) {
	h := newHarness(t, metastore.Express, 3, 2)
	h.start()
	h.star.meta = noMeta{}
	ids := h.open(metastore.Express, 3)
	for n := 0; n < 50; n++ {
		if _, err := h.star.Append(context.Background(), ids[n%3], recs(4, func(int) []byte { return []byte("m") }), AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(h.chainRecords("star-0", 1)[ids[0]]); got != 17*4 {
		t.Fatalf("stream 0 has %d records on the chain, want 68", got)
	}
}

func TestStartRefusesBucketWithoutConditionalWrites(t *testing.T) {
	h := newHarness(t, metastore.Standard, 1, 1, func(c *Config, _ *Options) {
		c.Standard.Buckets = []objstore.Bucket{overwriting{objstore.NewMem("liar")}}
	})
	err := h.star.Start(context.Background())
	if !errors.Is(err, ErrNoConditionalWrites) || !strings.Contains(err.Error(), "liar") {
		t.Fatalf("Start on a bucket without conditional writes: %v", err)
	}
}

// overwriting ignores the condition, as some emulators did.
type overwriting struct{ *objstore.Mem }

func (o overwriting) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	o.Mem.Delete(ctx, key)
	return o.Mem.PutIfAbsent(ctx, key, body)
}

// TestStartToleratesOneBucketDown: a bucket that cannot be probed (down)
// does not stop a start while W others prove conditional writes; with fewer
// than W provable, the start fails and says so.
func TestStartToleratesOneBucketDown(t *testing.T) {
	h := newHarness(t, metastore.Express, 3, 2)
	h.inj[2].SetDown(true)
	h.start()
	id := h.open(metastore.Express, 1)[0]
	if _, err := h.star.Append(context.Background(), id, recs(1, func(int) []byte { return []byte("x") }), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	h2 := newHarness(t, metastore.Express, 3, 2)
	h2.inj[0].SetDown(true)
	h2.inj[2].SetDown(true)
	if err := h2.star.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "only 1 of 3 buckets") {
		t.Fatalf("start with two of three buckets down: %v", err)
	}
}

// flakyWaker fails its first n deliveries.
type flakyWaker struct {
	mu    sync.Mutex
	fails int
	heads []metastore.Cursor
}

func (w *flakyWaker) Released(_ context.Context, _ metastore.ChainID, head metastore.Cursor) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fails > 0 {
		w.fails--
		return errors.New("queue unavailable")
	}
	w.heads = append(w.heads, head)
	return nil
}

func (w *flakyWaker) last() (metastore.Cursor, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.heads) == 0 {
		return metastore.Cursor{}, 0
	}
	return w.heads[len(w.heads)-1], len(w.heads)
}

// TestReleaseEventRetriedUntilDelivered: a release event that cannot be
// delivered is retried (with the latest head) with no further release to
// trigger it, so the absorb always hears of the final head.
func TestReleaseEventRetriedUntilDelivered(t *testing.T) {
	w := &flakyWaker{fails: 3}
	h := newHarness(t, metastore.Standard, 1, 1, func(c *Config, o *Options) {
		o.Waker = w
		c.ReleaseEventInterval = time.Millisecond
	})
	h.start()
	id := h.open(metastore.Standard, 1)[0]
	for i := 0; i < 3; i++ {
		if _, err := h.star.Append(context.Background(), id, recs(1, func(int) []byte { return []byte("x") }), AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := h.star.Released(metastore.ChainID{Star: "star-0", Class: metastore.Standard})
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, n := w.last()
		if got == want {
			if n == 0 {
				t.Fatal("no delivery")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("last delivered head %s, want %s (the failed deliveries were not retried)", got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
