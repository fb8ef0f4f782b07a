package read

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
	"github.com/strandlog/strand/shared/settle"
	"github.com/strandlog/strand/shared/star"
)

type env struct {
	t       *testing.T
	star    *star.Star
	meta    metastore.Store
	mems    []*objstore.Mem
	settled *objstore.Mem
	set     chain.Set
	r       *Reader
	st      metastore.Stream
	id      format.StreamID
	chain   metastore.ChainID
	index   *passindex.Window // nil: the absorb writes refs
}

func newEnv(t *testing.T) *env { return newEnvIndexed(t, false) }

// newEnvIndexed: with indexed, the absorb writes pass indexes instead of
// refs (design 014) and the reader finds them through its Transit.
func newEnvIndexed(t *testing.T, indexed bool) *env {
	t.Helper()
	e := &env{t: t, meta: metastore.NewMem(), settled: objstore.NewMem("settled")}
	var buckets []objstore.Bucket
	for i := range 3 {
		m := objstore.NewMem(fmt.Sprintf("x%d", i))
		e.mems = append(e.mems, m)
		buckets = append(buckets, m)
	}
	cfg := star.Defaults()
	cfg.Standard = star.ClassConfig{}
	cfg.Express = star.ClassConfig{Buckets: buckets, W: 2, MemoryBufferMiB: 8, ParallelUploads: 8,
		FlushDeadline: time.Millisecond, FlightKiB: 4, CommitDeadline: 5 * time.Second}
	s, err := star.New(cfg, e.meta, star.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	e.star = s
	e.chain = metastore.ChainID{Star: s.ID(), Class: metastore.Express}
	e.set = chain.Set{Star: s.ID(), Buckets: buckets, W: 2}
	e.id = format.StreamID{1, 2, 3}
	e.st = metastore.Stream{Name: "s", ID: e.id.String(), Class: metastore.Express, Star: s.ID(), State: metastore.StreamActive}
	if err := s.Open(star.StreamInfo{ID: e.id, Class: metastore.Express}); err != nil {
		t.Fatal(err)
	}
	e.r = &Reader{Star: s, Meta: e.meta, Sets: map[metastore.Class]chain.Set{metastore.Express: e.set}, Settled: e.settled}
	if indexed {
		e.index = &passindex.Window{Meta: e.meta, Bucket: e.settled}
		e.r.Transit = e.index
	}
	return e
}

// bothIndexes runs test with refs and with pass indexes (design 014),
// the latter twice: with the default window cache and with a budget
// smaller than one pass (every object fetched again on every walk).
func bothIndexes(t *testing.T, test func(t *testing.T, e *env)) {
	for _, indexed := range []bool{false, true} {
		t.Run(map[bool]string{false: "refs", true: "pass-index"}[indexed], func(t *testing.T) { test(t, newEnvIndexed(t, indexed)) })
	}
	t.Run("pass-index-tiny-cache", func(t *testing.T) {
		e := newEnvIndexed(t, true)
		e.index.MaxBytes = 1
		test(t, e)
		if st := e.index.Stats(); st.Objects != 0 {
			t.Fatalf("tiny window cache holds %+v", st)
		}
	})
}

// refs are the stream's refs from seq 0 as the reader finds them: refs,
// then the pass index window.
func (e *env) refs(limit int) ([]metastore.Ref, error) {
	return e.r.refsFrom(context.Background(), e.st, 0, limit)
}

// appendN appends batches of per records; record seq n has body "r<n>" and
// timestamp 1000+n.
func (e *env) appendN(batches, per int) {
	e.t.Helper()
	for range batches {
		next, _, _ := e.star.Tail(e.id)
		var recs []format.Record
		for i := range per {
			n := next + uint64(i)
			recs = append(recs, format.Record{TimestampMs: 1000 + int64(n), Body: fmt.Appendf(nil, "r%d", n),
				Headers: []format.Header{{Name: []byte("h"), Value: fmt.Appendf(nil, "%d", n)}}})
		}
		if _, err := e.star.Append(context.Background(), e.id, recs, star.AppendOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) absorb() {
	e.t.Helper()
	a := &absorb.Absorber{Meta: e.meta, Sets: absorb.Sets{Express: e.set}}
	if e.index != nil {
		a.Index = e.settled
	}
	cp, err := a.Run(context.Background(), e.chain, e.star.Released(e.chain))
	if err != nil {
		e.t.Fatal(err)
	}
	if e.index != nil { // the absorb wrote no ref: every ref is settle's
		refs, err := e.meta.QueryRefs(context.Background(), e.st.ID, 0, 1000)
		for _, r := range refs {
			if err != nil || slices.ContainsFunc(r.Locations, func(l metastore.Location) bool { return !l.Settled }) {
				e.t.Fatalf("the pass index absorb wrote a ref: %v, %v", r, err)
			}
		}
	}
	e.star.Absorbed(e.chain, cp)
}

func check(t *testing.T, recs []star.SeqRecord, first uint64, n int) {
	t.Helper()
	if len(recs) != n {
		t.Fatalf("got %d records, want %d", len(recs), n)
	}
	for i, r := range recs {
		want := first + uint64(i)
		if r.Seq != want || string(r.Body) != fmt.Sprintf("r%d", want) || r.TimestampMs != 1000+int64(want) ||
			len(r.Headers) != 1 || string(r.Headers[0].Value) != fmt.Sprint(want) {
			t.Fatalf("record %d: seq %d body %q ts %d headers %v, want seq %d", i, r.Seq, r.Body, r.TimestampMs, r.Headers, want)
		}
	}
}

func (e *env) read(start Start, lim Limits) Result {
	e.t.Helper()
	res, err := e.r.Read(context.Background(), e.st, start, lim)
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

func TestReadAcrossRefsAndIndex(t *testing.T) { bothIndexes(t, testReadAcrossRefsAndIndex) }

func testReadAcrossRefsAndIndex(t *testing.T, e *env) {
	e.appendN(20, 10)
	e.absorb()
	e.appendN(10, 10)
	if _, low, _ := e.star.ReadIndex(e.id, 0, 1, 1); low != 200 {
		t.Fatalf("index low %d, want 200: the test needs refs below the index", low)
	}
	res := e.read(Start{}, Limits{})
	check(t, res.Records, 0, 300)
	if res.Tail != 300 || res.LastTsMs != 1299 || res.Next != 300 {
		t.Fatalf("tail %d last ts %d next %d", res.Tail, res.LastTsMs, res.Next)
	}
	// Starting inside a ref, ending inside the index.
	check(t, e.read(Start{Seq: 195}, Limits{Count: 10}).Records, 195, 10)
	// Bytes limit: at least one record, never more than the limit, counted
	// in metered bytes (body plus header names and values), not encoded.
	one := format.MeteredSize(res.Records[0].Record)
	check(t, e.read(Start{Seq: 5}, Limits{Bytes: 1}).Records, 5, 1)
	check(t, e.read(Start{Seq: 5}, Limits{Bytes: 3*one + 1}).Records, 5, 3)
	// Tail offset, timestamp, clamp.
	check(t, e.read(Start{Kind: FromTailOffset, TailOffset: 7}, Limits{}).Records, 293, 7)
	check(t, e.read(Start{Kind: FromTailOffset, TailOffset: 1e9}, Limits{Count: 2}).Records, 0, 2)
	check(t, e.read(Start{Kind: FromTimestamp, TsMs: 1150}, Limits{Count: 3}).Records, 150, 3)
	check(t, e.read(Start{Kind: FromTimestamp, TsMs: 1250}, Limits{Count: 3}).Records, 250, 3)
	check(t, e.read(Start{Kind: FromTimestamp, TsMs: 0}, Limits{Count: 1}).Records, 0, 1)
	past := e.read(Start{Kind: FromTimestamp, TsMs: 99999}, Limits{})
	check(t, past.Records, 0, 0)
	if past.Tail != 300 {
		t.Fatalf("tail %d", past.Tail)
	}
	far := e.read(Start{Seq: 1 << 40}, Limits{})
	if len(far.Records) != 0 || far.Tail != 300 {
		t.Fatalf("past the tail: %d records, tail %d", len(far.Records), far.Tail)
	}
	if _, err := e.r.Read(context.Background(), e.st, Start{}, Limits{Count: -1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative limit: %v", err)
	}
}

// TestReadAcrossRefsRunsPassesAndFlight: on the pass index with runs
// (design 014, level 1), a stream's records lie behind refs (flushed),
// in runs (packed: one before a flush marker, behind the ref too, and
// one after it), in a pass index and in the star's flight index. Reads
// by seq and by timestamp from every boundary (and inside each part)
// find each record once, in order. With level 2 (fanout 3), the three
// runs are merged after the third step into one merged run holding the
// stream's flush marker then its later entry (design 014, "Level 2 as
// built"), and the reads are the same.
func TestReadAcrossRefsRunsPassesAndFlight(t *testing.T) {
	for _, fanout := range []int{-1, 3} {
		t.Run(fmt.Sprintf("fanout-%d", fanout), func(t *testing.T) { readAcrossRefsRunsPassesAndFlight(t, fanout) })
	}
}

func readAcrossRefsRunsPassesAndFlight(t *testing.T, fanout int) {
	e := newEnvIndexed(t, true)
	ctx := context.Background()
	merges := 0
	settleWith := func(flushBytes int64) settle.Result {
		t.Helper()
		s := e.settler()
		s.Fanout = fanout
		s.FlushBytes = flushBytes
		res, err := s.Step(ctx, e.chain)
		if err != nil || res.From == res.To {
			t.Fatalf("settle: %+v, %v", res, err)
		}
		merges += res.Merges
		return res
	}
	// Another stream in the first run, never flushed: the run stays live
	// (in [flushed, settled)) after the stream read here is flushed.
	other := format.StreamID{9}
	if err := e.star.Open(star.StreamInfo{ID: other, Class: metastore.Express}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.star.Append(ctx, other, []format.Record{{TimestampMs: 1000, Body: []byte("x")}}, star.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	e.appendN(4, 10) // 0-39: packed into a run
	e.absorb()
	first := settleWith(0)
	e.appendN(4, 10) // 40-79: flushed with 0-39 behind a ref (a marker in the second run)
	e.absorb()
	if res := settleWith(1); res.Flushes != 1 {
		t.Fatalf("second step: %+v, want a flush", res)
	}
	e.appendN(4, 10) // 80-119: packed into a third run
	e.absorb()
	settleWith(0)
	e.appendN(4, 10) // 120-159: in a pass index
	e.absorb()
	e.appendN(2, 10) // 160-179: in the flight index only
	h, err := e.meta.GetHead(ctx, e.chain)
	if err != nil {
		t.Fatal(err)
	}
	refs, err := e.meta.QueryRefs(ctx, e.st.ID, 0, 10)
	if err != nil || len(refs) != 1 || refs[0].LastSeq != 79 || h.Flushed != first.From || h.Settled == h.Checkpoint {
		t.Fatalf("setup: head %+v, refs %+v, %v", h, refs, err)
	}
	if _, low, _ := e.star.ReadIndex(e.id, 0, 1, 1); low != 160 {
		t.Fatalf("index low %d, want 160", low)
	}
	if want := fanout == 3; (merges == 1) != want || (h.Merged == h.Settled) != want {
		t.Fatalf("fanout %d: %d merges, head %+v", fanout, merges, h)
	}
	for _, from := range []uint64{0, 5, 39, 40, 41, 79, 80, 100, 119, 120, 140, 159, 160, 170, 179} {
		check(t, e.read(Start{Seq: from}, Limits{}).Records, from, int(180-from))
		check(t, e.read(Start{Kind: FromTimestamp, TsMs: 1000 + int64(from)}, Limits{}).Records, from, int(180-from))
		check(t, e.read(Start{Seq: from}, Limits{Count: 3}).Records, from, min(3, int(180-from)))
	}
	if res := e.read(Start{}, Limits{}); res.Tail != 180 || res.LastTsMs != 1179 {
		t.Fatalf("tail %d, last ts %d", res.Tail, res.LastTsMs)
	}
}

// corrupt replaces bucket i's copy of key with a copy whose byte at off is
// flipped.
func (e *env) corrupt(i int, key string, off int) {
	e.t.Helper()
	ctx := context.Background()
	b, err := e.mems[i].Get(ctx, key, 0, -1)
	if err != nil {
		e.t.Fatal(err)
	}
	b = bytes.Clone(b)
	b[off] ^= 0xff
	if err := e.mems[i].Delete(ctx, key); err != nil {
		e.t.Fatal(err)
	}
	if err := e.mems[i].PutIfAbsent(ctx, key, b); err != nil {
		e.t.Fatal(err)
	}
}

func TestCorruptCopyIsSkippedNeverServed(t *testing.T) {
	bothIndexes(t, testCorruptCopyIsSkippedNeverServed)
}

func testCorruptCopyIsSkippedNeverServed(t *testing.T, e *env) {
	e.appendN(5, 10)
	e.absorb()
	refs, err := e.refs(10)
	if err != nil || len(refs) == 0 {
		t.Fatalf("refs %v %v", refs, err)
	}
	loc := refs[0].Locations[0]
	// Flip a byte inside the first record's body in the first bucket.
	e.corrupt(0, loc.Key, int(loc.Offset)+32+16)
	check(t, e.read(Start{}, Limits{}).Records, 0, 50)
	// With every copy corrupt the read fails: it never serves bad bytes.
	// (A stored object never changes; this test rewrites one, so it reads
	// past the segment cache, which holds the good copy read above.)
	e.r.Cache = NewSegmentCache(0)
	for i := 1; i < 3; i++ {
		if _, err := e.mems[i].Head(context.Background(), loc.Key); err == nil {
			e.corrupt(i, loc.Key, int(loc.Offset)+32+16)
		}
	}
	if _, err := e.r.Read(context.Background(), e.st, Start{}, Limits{}); !errors.Is(err, chain.ErrNoCopy) {
		t.Fatalf("all copies corrupt: %v", err)
	}
}

func TestSettledLocation(t *testing.T) {
	e := newEnv(t)
	e.appendN(4, 10)
	e.absorb()
	ctx := context.Background()
	refs, err := e.meta.QueryRefs(ctx, e.st.ID, 0, 10)
	if err != nil || len(refs) != 1 {
		t.Fatalf("refs %v %v", refs, err)
	}
	ref := refs[0]
	res := e.read(Start{}, Limits{})
	var enc []byte
	for _, r := range res.Records {
		enc = format.AppendRecord(enc, r.Record)
	}
	obj, err := format.AppendSettled(nil, format.SettledHeader{Stream: e.id, FirstSeq: ref.FirstSeq, LastSeq: ref.LastSeq,
		FirstTsMs: ref.FirstTsMs, LastTsMs: ref.LastTsMs}, enc)
	if err != nil {
		t.Fatal(err)
	}
	key := format.SettledKey(e.id, ref.FirstSeq, ref.LastSeq)
	if err := e.settled.PutIfAbsent(ctx, key, obj); err != nil {
		t.Fatal(err)
	}
	repl := ref
	repl.Locations = []metastore.Location{{Settled: true, Key: key, Offset: format.SettledHeaderSize, Length: int64(len(obj) - format.SettledHeaderSize)}}
	if err := e.meta.SwapRefs(ctx, []metastore.Ref{ref}, repl); err != nil {
		t.Fatal(err)
	}
	// The transit copies are gone (trimmed): only the settled object serves.
	for _, m := range e.mems {
		for _, k := range m.Keys() {
			if k == ref.Locations[0].Key {
				_ = m.Delete(ctx, k)
			}
		}
	}
	check(t, e.read(Start{Seq: 3}, Limits{}).Records, 3, 37)
	// A corrupt settled object is an error, not data. (Past the segment
	// cache: a stored object never changes, this test rewrites one.)
	e.r.Cache = NewSegmentCache(0)
	b, _ := e.settled.Get(ctx, key, 0, -1)
	b = bytes.Clone(b)
	b[len(b)-10] ^= 1
	_ = e.settled.Delete(ctx, key)
	_ = e.settled.PutIfAbsent(ctx, key, b)
	if _, err := e.r.Read(ctx, e.st, Start{}, Limits{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt settled object: %v", err)
	}
}

func TestSessionTailsWithHeartbeats(t *testing.T) {
	e := newEnv(t)
	e.appendN(2, 5)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan Batch, 100)
	done := make(chan error, 1)
	go func() {
		done <- e.r.Session(ctx, e.st, Start{Seq: 3}, SessionOptions{Heartbeat: 20 * time.Millisecond}, func(b Batch) error {
			got <- b
			return nil
		})
	}()
	var recs []star.SeqRecord
	heartbeats := 0
	deadline := time.After(10 * time.Second)
	appended := false
	for len(recs) < 27 || heartbeats == 0 {
		select {
		case b := <-got:
			if b.Heartbeat {
				heartbeats++
				if len(b.Records) != 0 || b.Tail < 10 {
					t.Fatalf("heartbeat %+v", b)
				}
				if !appended {
					appended = true
					e.appendN(4, 5) // seen live
				}
			}
			recs = append(recs, b.Records...)
		case err := <-done:
			t.Fatalf("session ended: %v", err)
		case <-deadline:
			t.Fatalf("session saw %d records, %d heartbeats", len(recs), heartbeats)
		}
	}
	check(t, recs, 3, 27)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("session ended with %v", err)
	}
	// Bounded and non-tailing sessions end by themselves.
	var n int
	if err := e.r.Session(context.Background(), e.st, Start{}, SessionOptions{Count: 4}, func(b Batch) error { n += len(b.Records); return nil }); err != nil || n != 4 {
		t.Fatalf("count-bounded session: %d records, %v", n, err)
	}
	n = 0
	if err := e.r.Session(context.Background(), e.st, Start{Seq: 20}, SessionOptions{NoTail: true}, func(b Batch) error { n += len(b.Records); return nil }); err != nil || n != 10 {
		t.Fatalf("no-tail session: %d records, %v", n, err)
	}
}

// waitCopies waits until every bucket lists as many objects under prefix
// as the fullest one (the late copies of slots acked at W landed).
func waitCopies(t *testing.T, buckets []objstore.Bucket, prefix string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		most, least := 0, -1
		for _, b := range buckets {
			keys, err := b.List(context.Background(), prefix)
			if err != nil {
				t.Fatal(err)
			}
			most = max(most, len(keys))
			if least < 0 || len(keys) < least {
				least = len(keys)
			}
		}
		if least == most {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("copies under %s: %d to %d objects per bucket after 30 s", prefix, least, most)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// countingGets counts Gets on a bucket.
type countingGets struct {
	objstore.Bucket
	n    atomic.Int64
	mu   sync.Mutex
	gets []string // what each GET asked for
}

func (c *countingGets) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	c.n.Add(1)
	c.mu.Lock()
	c.gets = append(c.gets, fmt.Sprintf("%s %s@%d+%d", c.Bucket.Name(), key, off, n))
	c.mu.Unlock()
	return c.Bucket.Get(ctx, key, off, n)
}

// TestReadSkipsLocationsBeforeStart: a read from the middle of a ref that
// spans many flights fetches only the segments from its start on, not every
// segment of the ref (each location carries its first seq).
func TestReadSkipsLocationsBeforeStart(t *testing.T) {
	bothIndexes(t, testReadSkipsLocationsBeforeStart)
}

func testReadSkipsLocationsBeforeStart(t *testing.T, e *env) {
	e.appendN(40, 5) // 40 flights, one absorb pass: one ref with 40 locations
	e.absorb()
	refs, err := e.refs(10)
	if err != nil || len(refs) != 1 || len(refs[0].Locations) < 20 {
		t.Fatalf("want one ref over many flights, got %d refs (%v)", len(refs), err)
	}
	for i, l := range refs[0].Locations {
		if i > 0 && l.FirstSeq <= refs[0].Locations[i-1].FirstSeq {
			t.Fatalf("location %d starts at %d after %d", i, l.FirstSeq, refs[0].Locations[i-1].FirstSeq)
		}
	}
	// Every copy landed: the star acks at W copies and the last lands
	// after the ack; a GET of a copy not there yet asks the next zone,
	// which is not what this test counts.
	waitCopies(t, e.set.Buckets, "chains/")
	var counted []*countingGets
	var bs []objstore.Bucket
	for _, b := range e.set.Buckets {
		c := &countingGets{Bucket: b}
		counted = append(counted, c)
		bs = append(bs, c)
	}
	set := e.set
	set.Buckets = bs
	// No hedged GETs: on a loaded machine a GET outlasting its hedge asks
	// a second copy, which is not what this test counts.
	set.Hedge = time.Hour
	e.r.Sets = map[metastore.Class]chain.Set{metastore.Express: set}
	res := e.read(Start{Kind: FromSeq, Seq: 190}, Limits{Count: 5})
	check(t, res.Records, 190, 5)
	gets := int64(0)
	var asked []string
	for _, c := range counted {
		gets += c.n.Load()
		asked = append(asked, c.gets...)
	}
	if gets > 2 {
		t.Fatalf("reading 5 records at the end of a %d-location ref made %d GETs: %v", len(refs[0].Locations), gets, asked)
	}
}

// tornRefs answers QueryRefs the way the DynamoDB adapter does (the last
// ref that starts before fromSeq, then, in a second Query, the refs from
// fromSeq on) and runs between(fromSeq) once between the two Queries: what
// a SwapRefs or DeleteRefs that commits there does to the reader's view.
type tornRefs struct {
	metastore.Store
	between func(fromSeq uint64)
}

func (t *tornRefs) QueryRefs(ctx context.Context, id string, fromSeq uint64, limit int) ([]metastore.Ref, error) {
	var out []metastore.Ref
	if fromSeq > 0 {
		prev, err := t.Store.QueryRefs(ctx, id, fromSeq, 1)
		if err != nil {
			return nil, err
		}
		if len(prev) > 0 && prev[0].FirstSeq < fromSeq {
			out = append(out, prev[0])
		}
	}
	if fn := t.between; fn != nil {
		t.between = nil
		fn(fromSeq)
	}
	if len(out) >= limit {
		return out, nil
	}
	rest, err := t.Store.QueryRefs(ctx, id, fromSeq, limit+1)
	if err != nil {
		return nil, err
	}
	for _, r := range rest {
		if r.FirstSeq >= fromSeq && len(out) < limit {
			out = append(out, r)
		}
	}
	return out, nil
}

// merge swaps the refs starting at the given seqs for one ref over their
// range (what settle's merge does, here with the transit locations kept).
func (e *env) merge(firsts ...uint64) {
	e.t.Helper()
	ctx := context.Background()
	var old []metastore.Ref
	for _, f := range firsts {
		refs, err := e.meta.QueryRefs(ctx, e.st.ID, f, 1)
		if err != nil || len(refs) != 1 || refs[0].FirstSeq != f {
			e.t.Fatalf("ref at %d: %v %v", f, refs, err)
		}
		old = append(old, refs[0])
	}
	repl := old[0]
	repl.Locations = nil
	for _, o := range old {
		repl.LastSeq, repl.LastTsMs, repl.Bytes = o.LastSeq, o.LastTsMs, repl.Bytes+o.Bytes
		repl.Locations = append(repl.Locations, o.Locations...)
	}
	repl.Bytes -= old[0].Bytes
	if err := e.meta.SwapRefs(ctx, old, repl); err != nil {
		e.t.Fatal(err)
	}
}

// refsOf absorbs n passes of 10 records each: refs 0..9, 10..19, ...
func (e *env) refsOf(n int) {
	e.t.Helper()
	for range n {
		e.appendN(1, 10)
		e.absorb()
	}
	refs, err := e.meta.QueryRefs(context.Background(), e.st.ID, 0, 100)
	if err != nil || len(refs) != n {
		e.t.Fatalf("want %d refs, got %v %v", n, refs, err)
	}
}

// TestReadNeverSkipsATornRefView is issue 19's finding 1: settle merges
// refs 0..9 and 10..19 between the two Queries of a QueryRefs from 5, which
// then answers 0..9, 20..29. The read must not take that hole for a trim.
func TestReadNeverSkipsATornRefView(t *testing.T) {
	e := newEnv(t)
	e.refsOf(4)
	e.appendN(1, 10) // 40..49 in the index
	torn := &tornRefs{Store: e.meta}
	e.r.Meta = torn
	torn.between = func(uint64) { e.merge(0, 10) }
	res := e.read(Start{Seq: 5}, Limits{})
	check(t, res.Records, 5, 45)
	if res.Next != 50 {
		t.Fatalf("next %d", res.Next)
	}
	// A tail session reading from refs sees the same tear: no skip either.
	torn.between = func(uint64) { e.merge(20, 30) }
	var got []star.SeqRecord
	if err := e.r.Session(context.Background(), e.st, Start{Seq: 25}, SessionOptions{NoTail: true}, func(b Batch) error {
		got = append(got, b.Records...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	check(t, got, 25, 25)
}

// trimmedRefs shows a store without the refs whose first seqs it names, as
// retention trim leaves it (the reader sees refs only through QueryRefs).
type trimmedRefs struct {
	metastore.Store
	gone map[uint64]bool
}

func (t *trimmedRefs) QueryRefs(ctx context.Context, id string, fromSeq uint64, limit int) ([]metastore.Ref, error) {
	refs, err := t.Store.QueryRefs(ctx, id, fromSeq, limit+len(t.gone))
	var out []metastore.Ref
	for _, r := range refs {
		if !t.gone[r.FirstSeq] && len(out) < limit {
			out = append(out, r)
		}
	}
	return out, err
}

// TestReadSkipsOnlyBelowTheFirstRef: a hole below the stream's first ref is
// a trim and is skipped; a hole between refs that stays (never a trim,
// which removes refs from the oldest) is an Unavailable error, never
// skipped.
func TestReadSkipsOnlyBelowTheFirstRef(t *testing.T) {
	e := newEnv(t)
	e.refsOf(4)
	ctx := context.Background()
	tr := &trimmedRefs{Store: e.meta, gone: map[uint64]bool{0: true}}
	e.r.Meta = tr
	res := e.read(Start{Seq: 3}, Limits{})
	check(t, res.Records, 10, 30)
	check(t, e.read(Start{Kind: FromTimestamp, TsMs: 1002}, Limits{Count: 2}).Records, 10, 2)
	tr.gone[20] = true
	res, err := e.r.Read(ctx, e.st, Start{Seq: 12}, Limits{})
	if !errors.Is(err, metastore.ErrUnavailable) {
		t.Fatalf("read over a hole between refs: %v, records %d..", err, len(res.Records))
	}
	// Everything trimmed: the read starts at the index.
	tr.gone[10], tr.gone[30] = true, true
	e.appendN(1, 5)
	check(t, e.read(Start{}, Limits{}).Records, 40, 5)
}

// TestReadCountsMeteredBytes: a read's byte limit counts what the 1 MiB
// record limit counts (body plus header names and values): a record of
// exactly 1 MiB metered, with a header, is one read of 1 MiB, and two
// records of half that fit one read (their encodings do not).
func TestReadCountsMeteredBytes(t *testing.T) {
	e := newEnv(t)
	h := format.Header{Name: []byte("k"), Value: []byte("v")}
	half := format.Record{TimestampMs: 1, Headers: []format.Header{h}, Body: make([]byte, MaxBytes/2-2)}
	whole := format.Record{TimestampMs: 1, Headers: []format.Header{h}, Body: make([]byte, MaxBytes-2)}
	for _, r := range [][]format.Record{{half}, {half}, {whole}} {
		if _, err := e.star.Append(context.Background(), e.id, r, star.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if res := e.read(Start{}, Limits{Bytes: MaxBytes}); len(res.Records) != 2 {
		t.Fatalf("a read of %d bytes returned %d records of %d metered bytes, want 2", MaxBytes, len(res.Records), format.MeteredSize(half))
	}
	if res := e.read(Start{Seq: 2}, Limits{Bytes: MaxBytes}); len(res.Records) != 1 || format.MeteredSize(res.Records[0].Record) != MaxBytes {
		t.Fatalf("the 1 MiB record: %d records", len(res.Records))
	}
}

// TestReadHonoursTrim: once a trim is acknowledged, no read returns a
// record below it, whatever its start (seq, timestamp, tail offset), from
// refs or from the flight index, and a session below it skips to it.
func TestReadHonoursTrim(t *testing.T) {
	e := newEnv(t)
	e.appendN(10, 10)
	e.absorb()
	e.appendN(5, 10) // seqs 100..149 in the index
	if _, _, err := e.star.Trim(context.Background(), e.id, 120, star.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	// The trim record is seq 150; the stream's records from 120 on remain.
	for _, start := range []Start{{}, {Seq: 119}, {Kind: FromTimestamp, TsMs: 1005}, {Kind: FromTailOffset, TailOffset: 1000}} {
		res := e.read(start, Limits{Count: 5})
		check(t, res.Records, 120, 5)
	}
	check(t, e.read(Start{Seq: 130}, Limits{Count: 2}).Records, 130, 2)
	res := e.read(Start{Seq: 149}, Limits{})
	if len(res.Records) != 2 || format.CommandOf(res.Records[1].Record) != format.CommandTrim || res.Records[1].Seq != 150 {
		t.Fatalf("records from 149: %+v", res.Records)
	}
	// A later trim moves the point on.
	if _, _, err := e.star.Trim(context.Background(), e.id, 145, star.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	check(t, e.read(Start{Seq: 3}, Limits{Count: 5}).Records, 145, 5)
}

// TestSessionHonoursTrim: a session from seq 0 of a trimmed stream starts
// at the trim point, and a trim acknowledged while the session is behind
// it makes the session skip to the new point.
func TestSessionHonoursTrim(t *testing.T) {
	e := newEnv(t)
	e.appendN(15, 100) // seqs 0..1499: more than one batch of MaxCount
	ctx := context.Background()
	if _, _, err := e.star.Trim(ctx, e.id, 10, star.AppendOptions{}); err != nil { // seq 1500
		t.Fatal(err)
	}
	var got []uint64
	err := e.r.Session(ctx, e.st, Start{}, SessionOptions{NoTail: true}, func(b Batch) error {
		if len(got) == 0 {
			// The session is at 1010 now: trim past it.
			if _, _, err := e.star.Trim(ctx, e.id, 1200, star.AppendOptions{}); err != nil { // seq 1501
				return err
			}
		}
		for _, r := range b.Records {
			got = append(got, r.Seq)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != MaxCount+300+2 || got[0] != 10 || got[MaxCount-1] != 1009 || got[MaxCount] != 1200 || got[len(got)-1] != 1501 {
		t.Fatalf("session read %d records: first %d, then from %d, last %d; want 10..1009, 1200..1501", len(got), got[0], got[min(MaxCount, len(got)-1)], got[len(got)-1])
	}
}
