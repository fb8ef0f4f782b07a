package absorb_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/absorb/absorbtest"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/metacount"
	"github.com/strandlog/strand/shared/objstore"
)

var chainX = metastore.ChainID{Star: "star-0", Class: metastore.Express}

type env struct {
	t     *testing.T
	mem   *metastore.Mem
	count *metacount.Store
	set   chain.Set
	star  *absorbtest.Star
	ids   []format.StreamID
	a     *absorb.Absorber
	ts    int64
}

// newEnv is an Express chain (K=3, W=2) on memory buckets with n streams.
func newEnv(t *testing.T, streams int, wrap func(metastore.Store) metastore.Store) *env {
	t.Helper()
	e := &env{t: t, mem: metastore.NewMem(), ids: absorbtest.StreamIDs(streams), ts: 1_700_000_000_000}
	e.count = metacount.New(e.mem)
	var meta metastore.Store = e.count
	if wrap != nil {
		meta = wrap(meta)
	}
	e.set = chain.Set{Star: chainX.Star, W: 2, Buckets: []objstore.Bucket{objstore.NewMem("x-az1"), objstore.NewMem("x-az2"), objstore.NewMem("x-az3")}}
	star, err := absorbtest.NewStar(t.Context(), meta, chainX, e.set)
	if err != nil {
		t.Fatal(err)
	}
	e.star = star
	e.a = &absorb.Absorber{Meta: meta, Sets: absorb.Sets{Express: e.set}}
	return e
}

// flights writes n flights; stream i gets i%4+1 records in each.
func (e *env) flights(n int) {
	e.t.Helper()
	counts := make([]int, len(e.ids))
	for i := range counts {
		counts[i] = i%4 + 1
	}
	for range n {
		if _, err := e.star.Flight(e.t.Context(), e.ids, counts, e.ts, 40, 0); err != nil {
			e.t.Fatal(err)
		}
		e.ts += 10
	}
}

func (e *env) head() metastore.Head {
	e.t.Helper()
	h, err := e.mem.GetHead(e.t.Context(), chainX)
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

// check reads every stream back through its refs and compares it with
// what the star wrote, record by record.
func (e *env) check() {
	e.t.Helper()
	for _, id := range e.ids {
		got, err := absorbtest.ReadStream(e.t.Context(), e.mem, e.set, nil, id)
		if err != nil {
			e.t.Fatalf("read stream %s: %v", id, err)
		}
		if err := absorbtest.Equal(got, e.star.Written(id)); err != nil {
			e.t.Fatalf("stream %s: %v", id, err)
		}
	}
}

func cur(e, s uint64) metastore.Cursor { return metastore.Cursor{Epoch: e, Slot: s} }

func TestPassAbsorbsToReleasedHead(t *testing.T) {
	e := newEnv(t, 3, nil)
	e.flights(10)
	res, err := e.a.Pass(t.Context(), chainX, e.star.Released())
	if err != nil {
		t.Fatal(err)
	}
	if res.From != cur(1, 0) || res.To != cur(1, 10) || res.Slots != 10 || res.Refs != 3 || res.Joined || res.Lost {
		t.Fatalf("pass: %+v", res)
	}
	if h := e.head(); h.Checkpoint != cur(1, 10) || !h.Absorbing.IsZero() {
		t.Fatalf("head after pass: %+v", h)
	}
	// One ref per stream for the whole pass, one location per slot.
	for i, id := range e.ids {
		refs, err := e.mem.QueryRefs(t.Context(), id.String(), 0, 10)
		if err != nil || len(refs) != 1 {
			t.Fatalf("stream %d: refs %v, %v", i, refs, err)
		}
		r := refs[0]
		n := uint64(10 * (i + 1))
		if r.FirstSeq != 0 || r.LastSeq != n-1 || len(r.Locations) != 10 || r.FirstTsMs != 1_700_000_000_000 {
			t.Fatalf("stream %d ref: %+v", i, r)
		}
		for s, l := range r.Locations {
			if l.Settled || l.Key != format.SlotKey("star-0", 1, uint64(s)) {
				t.Fatalf("stream %d location %d: %+v", i, s, l)
			}
		}
	}
	e.check()
	// Nothing more: a noop that writes nothing.
	before := e.count.Snapshot()
	res, err = e.a.Pass(t.Context(), chainX, e.star.Released())
	if err != nil || !res.Noop() {
		t.Fatalf("second pass: %+v, %v", res, err)
	}
	if d := e.count.Snapshot().Sub(before); d.Writes() != 0 || d.Total() != 1 {
		t.Fatalf("noop pass cost %s, want one GetHead", d)
	}
}

func TestRedeliveryWritesIdenticalItems(t *testing.T) {
	e := newEnv(t, 2, nil)
	e.flights(6)
	ev := e.star.Released()
	for i := range 3 {
		if _, err := e.a.Run(t.Context(), chainX, ev); err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
	}
	if h := e.head(); h.Checkpoint != cur(1, 6) {
		t.Fatalf("checkpoint %s", h.Checkpoint)
	}
	refs, _ := e.mem.QueryRefs(t.Context(), e.ids[1].String(), 0, 10)
	if len(refs) != 1 || refs[0].LastSeq != 11 {
		t.Fatalf("refs after redelivery: %+v", refs)
	}
	e.check()
}

func TestOutOfOrderEvents(t *testing.T) {
	e := newEnv(t, 3, nil)
	e.flights(12)
	var seen []metastore.Cursor
	for _, slot := range []uint64{5, 12, 3, 9, 0, 12} {
		at, err := e.a.Run(t.Context(), chainX, cur(1, slot))
		if err != nil {
			t.Fatalf("event %d: %v", slot, err)
		}
		seen = append(seen, at)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i].Less(seen[i-1]) {
			t.Fatalf("checkpoint moved backward: %v", seen)
		}
	}
	if h := e.head(); h.Checkpoint != cur(1, 12) {
		t.Fatalf("checkpoint %s", h.Checkpoint)
	}
	// Two passes: [0,5) and [5,12): two refs per stream.
	refs, _ := e.mem.QueryRefs(t.Context(), e.ids[0].String(), 0, 10)
	if len(refs) != 2 || refs[0].LastSeq != 4 || refs[1].FirstSeq != 5 {
		t.Fatalf("refs: %+v", refs)
	}
	e.check()
}

func TestConcurrentPasses(t *testing.T) {
	e := newEnv(t, 4, nil)
	e.a.MaxSlotsPerPass = 7
	e.flights(60)
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each copy saw a different release event.
			head := cur(1, uint64(30+2*i))
			for {
				at, err := e.a.Run(t.Context(), chainX, head)
				if err != nil {
					errs[i] = err
					return
				}
				if !at.Less(head) {
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
	}
	if h := e.head(); h.Checkpoint != cur(1, 60) || !h.Absorbing.IsZero() {
		t.Fatalf("head: %+v", h)
	}
	e.check() // contiguous from 0, no overlap, every record exact
}

// failOnce fails the first AdvanceCursor of the checkpoint: a crash after
// the refs were written and before the CAS.
type failOnce struct {
	metastore.Store
	armed atomic.Bool
}

func (f *failOnce) AdvanceCursor(ctx context.Context, c metastore.ChainID, k metastore.CursorKind, from, to metastore.Cursor) error {
	if k == metastore.Checkpoint && f.armed.CompareAndSwap(true, false) {
		return fmt.Errorf("crash before the checkpoint CAS: %w", absorbtest.ErrFault)
	}
	return f.Store.AdvanceCursor(ctx, c, k, from, to)
}

func TestCrashBetweenRefsAndCheckpoint(t *testing.T) {
	var fo *failOnce
	e := newEnv(t, 3, func(s metastore.Store) metastore.Store { fo = &failOnce{Store: s}; return fo })
	e.flights(8)
	fo.armed.Store(true)
	if _, err := e.a.Pass(t.Context(), chainX, cur(1, 5)); !errors.Is(err, absorbtest.ErrFault) {
		t.Fatalf("crashing pass: %v", err)
	}
	h := e.head()
	if h.Checkpoint != cur(1, 0) || h.Absorbing != cur(1, 5) {
		t.Fatalf("head after the crash: %+v", h)
	}
	// The redelivered event names a later head; the pass completes the
	// crashed pass first (same slots, identical refs), then its own.
	res, err := e.a.Pass(t.Context(), chainX, cur(1, 8))
	if err != nil || !res.Joined || res.To != cur(1, 5) {
		t.Fatalf("recovering pass: %+v, %v", res, err)
	}
	if _, err := e.a.Run(t.Context(), chainX, cur(1, 8)); err != nil {
		t.Fatal(err)
	}
	if h := e.head(); h.Checkpoint != cur(1, 8) {
		t.Fatalf("head: %+v", h)
	}
	refs, _ := e.mem.QueryRefs(t.Context(), e.ids[0].String(), 0, 10)
	if len(refs) != 2 || refs[0].LastSeq != 4 || refs[1].FirstSeq != 5 {
		t.Fatalf("refs: %+v", refs)
	}
	e.check()
}

// blockPut parks the first PutRefs until released: a pass that stalls
// after its walk.
type blockPut struct {
	metastore.Store
	once            sync.Once
	parked, release chan struct{}
}

func (b *blockPut) PutRefs(ctx context.Context, c metastore.ChainID, pass metastore.Cursor, refs []metastore.Ref) error {
	first := false
	b.once.Do(func() { first = true })
	if first {
		close(b.parked)
		<-b.release
	}
	return b.Store.PutRefs(ctx, c, pass, refs)
}

func TestStalePassCannotOverwriteSettledRef(t *testing.T) {
	var bp *blockPut
	e := newEnv(t, 1, func(s metastore.Store) metastore.Store {
		bp = &blockPut{Store: s, parked: make(chan struct{}), release: make(chan struct{})}
		return bp
	})
	e.flights(4)
	stale := make(chan absorb.Result, 1)
	go func() {
		res, err := e.a.Pass(context.Background(), chainX, cur(1, 4))
		if err != nil {
			t.Error(err)
		}
		stale <- res
	}()
	<-bp.parked
	// Another copy completes the same pass.
	if res, err := e.a.Pass(t.Context(), chainX, cur(1, 4)); err != nil || !res.Joined || res.To != cur(1, 4) {
		t.Fatalf("second copy: %+v, %v", res, err)
	}
	// Settle moves the ref to a settled object.
	id := e.ids[0].String()
	refs, _ := e.mem.QueryRefs(t.Context(), id, 0, 10)
	settled := refs[0]
	settled.Locations = []metastore.Location{{Settled: true, Key: format.SettledKey(e.ids[0], 0, 3), Offset: 64, Length: 100}}
	if err := e.mem.SwapRefs(t.Context(), refs, settled); err != nil {
		t.Fatal(err)
	}
	close(bp.release)
	res := <-stale
	if !res.Lost {
		t.Fatalf("stale pass: %+v, want lost", res)
	}
	refs, _ = e.mem.QueryRefs(t.Context(), id, 0, 10)
	if len(refs) != 1 || !metastore.EqualRef(refs[0], settled) {
		t.Fatalf("refs after the stale pass: %+v", refs)
	}
}

func TestEpochBoundary(t *testing.T) {
	e := newEnv(t, 2, nil)
	e.flights(5)
	if err := e.star.Halt(t.Context(), 1); err != nil { // cut 5, next epoch 3
		t.Fatal(err)
	}
	e.flights(4)
	at, err := e.a.Run(t.Context(), chainX, e.star.Released())
	if err != nil {
		t.Fatal(err)
	}
	if at != cur(3, 4) {
		t.Fatalf("checkpoint %s, want 3/4", at)
	}
	e.check()
	// A stale event of epoch 1 changes nothing.
	if at, err := e.a.Run(t.Context(), chainX, cur(1, 5)); err != nil || at != cur(3, 4) {
		t.Fatalf("stale event: %s, %v", at, err)
	}
}

func TestSweepStopsAtUncommittedSlot(t *testing.T) {
	e := newEnv(t, 2, nil)
	e.flights(5)
	// Slot 5 reached one bucket only (W=2): not committed.
	if _, err := e.star.Flight(t.Context(), e.ids, []int{1, 1}, e.ts, 10, 1); err != nil {
		t.Fatal(err)
	}
	h := &absorb.Handler{Absorber: e.a, Chains: []metastore.ChainID{chainX, {Star: "star-9", Class: metastore.Express}}}
	if err := h.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := e.head().Checkpoint; got != cur(1, 5) {
		t.Fatalf("checkpoint after sweep %s, want 1/5", got)
	}
}

func TestGapIsLoud(t *testing.T) {
	e := newEnv(t, 1, nil)
	e.flights(1)
	// Slot 1 restarts the stream's seqs at 0: a duplicate the write path
	// must never produce.
	b := format.NewBuilder()
	b.Reset(1, 1, format.Nonce{1})
	recs := absorbtest.Records(e.ids[0], 0, 1, 5, 10)
	b.BeginSegment(e.ids[0], 0)
	b.AddRecords(format.AppendRecord(nil, recs[0]), 1, 5, 5)
	b.EndSegment()
	obj := b.Finish()
	for _, bk := range e.set.Buckets {
		if err := bk.PutIfAbsent(t.Context(), format.SlotKey("star-0", 1, 1), obj); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.a.Pass(t.Context(), chainX, cur(1, 2)); !errors.Is(err, absorb.ErrGap) {
		t.Fatalf("pass over a gap: %v, want ErrGap", err)
	}
	if refs, _ := e.mem.QueryRefs(t.Context(), e.ids[0].String(), 0, 10); len(refs) != 0 {
		t.Fatalf("refs written despite the gap: %+v", refs)
	}
	if h := e.head(); h.Checkpoint != cur(1, 0) {
		t.Fatalf("checkpoint moved over a gap: %+v", h)
	}
}

// TestOpsPerPassFlat: a pass costs the same metastore calls however many
// slots and records it covers: GetHead, BeginAbsorb, one PutRefs per 99
// streams, AdvanceCursor.
func TestOpsPerPassFlat(t *testing.T) {
	for _, tc := range []struct{ streams, slots int }{{5, 8}, {5, 24}, {5, 80}, {150, 8}, {150, 80}} {
		e := newEnv(t, tc.streams, nil)
		e.flights(tc.slots)
		before := e.count.Snapshot()
		res, err := e.a.Pass(t.Context(), chainX, e.star.Released())
		if err != nil || res.Slots != tc.slots {
			t.Fatalf("%+v: %+v, %v", tc, res, err)
		}
		d := e.count.Snapshot().Sub(before)
		puts := int64((tc.streams + metastore.MaxPutRefsPerTx - 1) / metastore.MaxPutRefsPerTx)
		if d.Total() != 3+puts || d.Of(metacount.PutRefs) != puts || d.RefItems != int64(tc.streams) {
			t.Fatalf("%d streams, %d slots: pass cost %s", tc.streams, tc.slots, d)
		}
		e.check()
	}
}

func readFixture(t *testing.T, name string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestHandlerSQSFixture(t *testing.T) {
	e := newEnv(t, 2, nil)
	e.flights(6)
	h := &absorb.Handler{Absorber: e.a, Chains: []metastore.ChainID{chainX}}
	out, err := h.Handle(t.Context(), readFixture(t, "sqs-release.json"))
	if err != nil {
		t.Fatal(err)
	}
	resp, ok := out.(events.SQSEventResponse)
	if !ok || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m-bad" {
		t.Fatalf("response %+v", out)
	}
	if got := e.head().Checkpoint; got != cur(1, 6) {
		t.Fatalf("checkpoint %s, want the batch's highest head 1/6", got)
	}
	e.check()
	// Redelivered whole: nothing fails, nothing changes.
	out, err = h.Handle(t.Context(), readFixture(t, "sqs-release.json"))
	if resp := out.(events.SQSEventResponse); err != nil || len(resp.BatchItemFailures) != 1 {
		t.Fatalf("redelivery: %+v, %v", out, err)
	}
	e.check()
}

func TestHandlerFailsOnlyTheFailingChain(t *testing.T) {
	e := newEnv(t, 2, nil)
	e.flights(3)
	h := &absorb.Handler{Absorber: e.a}
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "ok", Body: string(absorb.NewEvent(chainX, cur(1, 3)).Marshal())},
		// A chain with no bucket set configured (Standard): its run fails.
		{MessageId: "no-set", Body: `{"star":"star-0","class":"standard","epoch":1,"slot":3}`},
		{MessageId: "junk", Body: `not json`},
	}}
	resp, err := h.HandleSQS(t.Context(), ev)
	if err != nil {
		t.Fatal(err)
	}
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	if len(failed) != 2 || !failed["no-set"] || !failed["junk"] {
		t.Fatalf("failures %+v", resp.BatchItemFailures)
	}
	if got := e.head().Checkpoint; got != cur(1, 3) {
		t.Fatalf("checkpoint %s", got)
	}
}

func TestHandlerScheduledAndDirectFixtures(t *testing.T) {
	e := newEnv(t, 2, nil)
	e.flights(8)
	h := &absorb.Handler{Absorber: e.a, Chains: []metastore.ChainID{chainX}}
	if _, err := h.Handle(t.Context(), readFixture(t, "release.json")); err != nil {
		t.Fatal(err)
	}
	if got := e.head().Checkpoint; got != cur(1, 6) {
		t.Fatalf("checkpoint after the direct event %s", got)
	}
	if _, err := h.Handle(t.Context(), readFixture(t, "scheduled.json")); err != nil {
		t.Fatal(err)
	}
	if got := e.head().Checkpoint; got != cur(1, 8) {
		t.Fatalf("checkpoint after the sweep %s", got)
	}
	e.check()
	if _, err := h.Handle(t.Context(), json.RawMessage(`{"hello":1}`)); err == nil {
		t.Fatal("unrecognised event accepted")
	}
}

func TestParseEvent(t *testing.T) {
	good := absorb.Event{Star: "star-0", Class: "express", Epoch: 3, Slot: 120}
	got, err := absorb.ParseEvent([]byte(`{"star":"star-0","class":"express","epoch":3,"slot":120}`))
	if err != nil || got != good {
		t.Fatalf("parse: %+v, %v", got, err)
	}
	if rt, err := absorb.ParseEvent(good.Marshal()); err != nil || rt != good {
		t.Fatalf("round trip: %+v, %v", rt, err)
	}
	if good.GroupID() != "star-0/express" || good.Released() != cur(3, 120) {
		t.Fatalf("group %q released %s", good.GroupID(), good.Released())
	}
	for _, bad := range []string{
		``, `{}`, `[]`, `{"star":"star-0","class":"express","epoch":0,"slot":1}`,
		`{"star":"","class":"express","epoch":1,"slot":1}`,
		`{"star":"a#b","class":"express","epoch":1,"slot":1}`,
		`{"star":"star-0","class":"cold","epoch":1,"slot":1}`,
		`{"star":"star-0","class":"express","epoch":1,"slot":1,"sloth":2}`,
		`{"star":"star-0","class":"express","epoch":1,"slot":-1}`,
		`{"star":"star-0","class":"express","epoch":1,"slot":1}{}`,
	} {
		if _, err := absorb.ParseEvent([]byte(bad)); !errors.Is(err, absorb.ErrEvent) {
			t.Errorf("%q: %v, want ErrEvent", bad, err)
		}
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := map[string]string{
		"STRAND_TABLE": "strand", "STRAND_STARS": "star-0, star-1", "STRAND_STANDARD_BUCKET": "chain",
		"STRAND_EXPRESS_BUCKETS": "x1--use1-az4--x-s3,x2--use1-az5--x-s3,x3--use1-az6--x-s3", "STRAND_SETTLED_BUCKET": "settled",
	}
	get := func(k string) string { return env[k] }
	c, err := absorb.ConfigFromEnv(get)
	if err != nil {
		t.Fatal(err)
	}
	if c.ExpressW != 2 || len(c.Stars) != 2 || len(c.Chains()) != 4 || c.Chains()[1] != (metastore.ChainID{Star: "star-0", Class: metastore.Express}) {
		t.Fatalf("config %+v chains %v", c, c.Chains())
	}
	sets := c.Sets(func(n string) objstore.Bucket { return objstore.NewMem(n) })
	if set, err := sets.For(metastore.ChainID{Star: "star-1", Class: metastore.Express}); err != nil || set.K() != 3 || set.W != 2 || set.Star != "star-1" {
		t.Fatalf("express set %+v, %v", set, err)
	}
	env["STRAND_STAR_IDS"] = "star-7"
	if c, _ := absorb.ConfigFromEnv(get); len(c.Stars) != 1 || c.Stars[0] != "star-7" {
		t.Fatalf("STRAND_STAR_IDS not preferred: %v", c.Stars)
	}
	if !c.PassIndex {
		t.Fatal("the pass index is off by default")
	}
	env["STRAND_PASS_INDEX"] = "false"
	if c, err := absorb.ConfigFromEnv(get); err != nil || c.PassIndex {
		t.Fatalf("STRAND_PASS_INDEX=false: %+v, %v", c, err)
	}
	env["STRAND_PASS_INDEX"] = "true"
	if c, err := absorb.ConfigFromEnv(get); err != nil || !c.PassIndex {
		t.Fatalf("STRAND_PASS_INDEX=true: %+v, %v", c, err)
	}
	env["STRAND_SETTLED_BUCKET"] = ""
	if _, err := absorb.ConfigFromEnv(get); err == nil {
		t.Error("the pass index without a settled bucket accepted")
	}
	env["STRAND_SETTLED_BUCKET"], env["STRAND_PASS_INDEX"] = "settled", ""
	if w := c.Window(nil, nil, 0); w.MaxBytes != 0 {
		t.Fatalf("default window budget %d, want 0 (passindex.DefaultWindowCacheBytes)", w.MaxBytes)
	}
	env["STRAND_WINDOW_CACHE_MIB"] = "512"
	if c, err := absorb.ConfigFromEnv(get); err != nil || c.WindowCacheMiB != 512 || c.Window(nil, nil, 4).MaxBytes != 512<<20 || c.Window(nil, nil, 4).Parallel != 4 {
		t.Fatalf("STRAND_WINDOW_CACHE_MIB=512: %+v, %v", c, err)
	}
	env["STRAND_WINDOW_CACHE_MIB"] = ""
	for k, v := range map[string]string{"STRAND_TABLE": "", "STRAND_EXPRESS_W": "4", "STRAND_S3_PATH_STYLE": "maybe", "STRAND_STAR_IDS": "a#b", "STRAND_PASS_INDEX": "yes",
		"STRAND_WINDOW_CACHE_MIB": "-1"} {
		old := env[k]
		env[k] = v
		if _, err := absorb.ConfigFromEnv(get); err == nil {
			t.Errorf("%s=%q accepted", k, v)
		}
		env[k] = old
	}
}

// TestLongPassSplitsRefs: one stream in every slot of a long pass would
// make a ref over metastore.MaxRefBytes, which the metastore (as DynamoDB)
// refuses, pinning the pass under its lease forever (issue 13, finding 2).
// BuildRefs splits it into adjacent refs under the bound, and the pass
// completes; with many streams, the refs go in transactions under 4 MB.
func TestLongPassSplitsRefs(t *testing.T) {
	const slots = 1000
	e := newEnv(t, 2, nil)
	e.a.MaxSlotsPerPass = slots
	e.flights(slots)
	res, err := e.a.Pass(t.Context(), chainX, e.star.Released())
	if err != nil || res.Slots != slots || res.Lost {
		t.Fatalf("pass: %+v, %v", res, err)
	}
	refs, err := e.mem.QueryRefs(t.Context(), e.ids[0].String(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) < 2 {
		t.Fatalf("%d refs for one stream in %d slots, want it split", len(refs), slots)
	}
	for _, r := range refs {
		if err := metastore.CheckRefSize(r); err != nil {
			t.Fatal(err)
		}
	}
	if h := e.head(); !h.Absorbing.IsZero() || h.Checkpoint != cur(1, slots) {
		t.Fatalf("head %+v: want the pass completed", h)
	}
	e.check()
	// Deterministic: the same slots give the same refs.
	var all []chain.Slot
	if err := e.set.Walk(t.Context(), 1, 0, slots, func(s chain.Slot) error { all = append(all, s); return nil }); err != nil {
		t.Fatal(err)
	}
	a, err := absorb.BuildRefs(all)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := absorb.BuildRefs(all)
	if len(a) != len(b) || len(a) < 4 {
		t.Fatalf("BuildRefs gave %d then %d refs", len(a), len(b))
	}
	for i := range a {
		if !metastore.EqualRef(a[i], b[i]) {
			t.Fatalf("BuildRefs is not deterministic at ref %d", i)
		}
		if i > 0 && a[i].StreamID == a[i-1].StreamID && a[i].FirstSeq != a[i-1].LastSeq+1 {
			t.Fatalf("refs %d and %d of one stream are not adjacent", i-1, i)
		}
	}
}
