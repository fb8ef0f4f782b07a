package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

var (
	express  = metastore.ChainID{Star: "star-0", Class: metastore.Express}
	standard = metastore.ChainID{Star: "star-0", Class: metastore.Standard}
	// writer nonces of the epochs
	nonce3      = format.Nonce{3, 3, 3}
	nonce1      = format.Nonce{1, 1, 1}
	fencerNonce = format.Nonce{0xfe}
	streamA     = format.StreamID{0xa0}
)

type world struct {
	meta    *metastore.Mem
	xs      []*objstore.Mem // express buckets x0..x2
	xinj    []*objstore.Injector
	std     *objstore.Mem
	settled *objstore.Mem
	h       *Handler
	deletes []string
}

func flight(epoch, slot uint64, nonce format.Nonce) []byte {
	b := format.NewBuilder()
	b.Reset(epoch, slot, nonce)
	rec := format.AppendRecord(nil, format.Record{TimestampMs: 1700000000000, Body: []byte("x")})
	b.BeginSegment(streamA, slot)
	b.AddRecords(rec, 1, 1700000000000, 1700000000000)
	b.EndSegment()
	return slices.Clone(b.Finish())
}

func poison(epoch, slot uint64) []byte { return format.Poison(epoch, slot, fencerNonce).Bytes() }

func put(t *testing.T, b *objstore.Mem, key string, body []byte) {
	t.Helper()
	if err := b.PutIfAbsent(context.Background(), key, body); err != nil {
		t.Fatal(err)
	}
}

func mint(t *testing.T, meta metastore.Store, c metastore.ChainID, prev uint64, e metastore.Epoch, cut uint64) {
	t.Helper()
	ctx := context.Background()
	e.State = metastore.EpochActive
	if err := meta.MintEpoch(ctx, c, prev, e); err != nil {
		t.Fatal(err)
	}
	if cut != ^uint64(0) {
		e.State, e.Cut = metastore.EpochFenced, cut
		if err := meta.UpdateEpoch(ctx, c, metastore.EpochActive, e); err != nil {
			t.Fatal(err)
		}
	}
}

// newWorld builds the scenario the fixtures run against:
//
//	star-0/express, K=3 W=2, buckets x0 x1 x2: epoch 1 fenced at cut 5
//	(window 4), epoch 2 never minted, epoch 3 fenced at cut 17 (window 32),
//	epoch 4 current (active).
//	star-0/standard, K=1, bucket std: epoch 1 fenced at cut 2 (window 2),
//	epoch 2 current.
func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{meta: metastore.NewMem(), std: objstore.NewMem("std"), settled: objstore.NewMem("settled")}
	var xb []objstore.Bucket
	for i := range 3 {
		m := objstore.NewMem(fmt.Sprintf("x%d", i))
		inj := objstore.NewInjector(int64(i))
		inj.OnCall(func(op objstore.Op, key string) {
			if op == objstore.OpDelete {
				w.deletes = append(w.deletes, fmt.Sprintf("x%d/%s", i, key))
			}
		})
		w.xs = append(w.xs, m)
		w.xinj = append(w.xinj, inj)
		xb = append(xb, objstore.WithFaults(m, inj))
	}
	xnames := []string{"x0", "x1", "x2"}
	mint(t, w.meta, express, 0, metastore.Epoch{Epoch: 1, K: 3, W: 2, Buckets: xnames, Window: 4, Nonce: nonce1}, 5)
	mint(t, w.meta, express, 1, metastore.Epoch{Epoch: 3, K: 3, W: 2, Buckets: xnames, Window: 32, Nonce: nonce3}, 17)
	mint(t, w.meta, express, 3, metastore.Epoch{Epoch: 4, K: 3, W: 2, Buckets: xnames, Window: 32, Nonce: format.Nonce{4}}, ^uint64(0))
	mint(t, w.meta, standard, 0, metastore.Epoch{Epoch: 1, K: 1, W: 1, Buckets: []string{"std"}, Window: 2, Nonce: nonce1}, 2)
	mint(t, w.meta, standard, 1, metastore.Epoch{Epoch: 2, K: 1, W: 1, Buckets: []string{"std"}, Window: 2, Nonce: format.Nonce{2}}, ^uint64(0))

	key := func(e, s uint64) string { return format.SlotKey("star-0", e, s) }
	// Express epoch 3: committed slots below the cut (never touched).
	for s := uint64(15); s < 17; s++ {
		for _, b := range w.xs[:2] {
			put(t, b, key(3, s), flight(3, s, nonce3))
		}
	}
	// The cut slot: dead (two poisons), one stray flight copy.
	put(t, w.xs[0], key(3, 17), poison(3, 17))
	put(t, w.xs[1], key(3, 17), poison(3, 17))
	put(t, w.xs[2], key(3, 17), flight(3, 17, nonce3))
	// Above the cut: committed-but-never-acked and partial flights.
	for s := uint64(18); s < 20; s++ {
		for _, b := range w.xs {
			put(t, b, key(3, s), flight(3, s, nonce3))
		}
	}
	put(t, w.xs[0], key(3, 20), flight(3, 20, nonce3))
	put(t, w.xs[2], key(3, 21), []byte("junk junk junk"))
	put(t, w.xs[1], key(3, 22), flight(3, 22, format.Nonce{0xbb})) // foreign nonce: kept
	put(t, w.xs[1], key(3, 48), flight(3, 48, nonce3))             // cut+window-1: last in the window
	put(t, w.xs[1], key(3, 49), flight(3, 49, nonce3))             // cut+window: outside
	// Express epoch 1: cut 5, window 4.
	for _, b := range w.xs[1:] {
		put(t, b, key(1, 5), poison(1, 5))
	}
	put(t, w.xs[0], key(1, 8), flight(1, 8, nonce1))
	// Epoch 4 (current): its flights are live data.
	for _, b := range w.xs {
		put(t, b, key(4, 0), flight(4, 0, format.Nonce{4}))
	}
	// Standard epoch 1: cut 2, window 2.
	put(t, w.std, key(1, 1), flight(1, 1, nonce1))
	put(t, w.std, key(1, 2), poison(1, 2))
	put(t, w.std, key(1, 3), flight(1, 3, nonce1))
	put(t, w.std, key(1, 4), flight(1, 4, nonce1))

	// Settled objects: one referenced, one orphan, one stray key.
	ref := format.SettledKey(streamA, 0, 9)
	put(t, w.settled, ref, []byte("settled"))
	put(t, w.settled, format.SettledKey(streamA, 10, 19), []byte("settled"))
	put(t, w.settled, "streams/garbage", []byte("?"))
	pass := metastore.Cursor{Epoch: 1, Slot: 1}
	if _, err := w.meta.BeginAbsorb(context.Background(), standard, metastore.Cursor{Epoch: 1}, pass); err != nil {
		t.Fatal(err)
	}
	if err := w.meta.PutRefs(context.Background(), standard, pass, []metastore.Ref{
		{StreamID: streamA.String(), FirstSeq: 0, LastSeq: 9, Bytes: 7, Locations: []metastore.Location{{Settled: true, Key: ref, Length: 7}}},
		{StreamID: streamA.String(), FirstSeq: 10, LastSeq: 19, Bytes: 7, Locations: []metastore.Location{{Key: key(3, 15), Offset: 60, Length: 7}}},
	}); err != nil {
		t.Fatal(err)
	}

	w.h = &Handler{
		Sets: map[metastore.ChainID]chain.Set{
			express:  {Star: "star-0", Buckets: xb, W: 2},
			standard: {Star: "star-0", Buckets: []objstore.Bucket{w.std}, W: 1},
		},
		Meta:    w.meta,
		Settled: w.settled,
	}
	return w
}

func fixture(t *testing.T, name string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func has(m *objstore.Mem, key string) bool {
	_, err := m.Head(context.Background(), key)
	return err == nil
}

var epoch3Deleted = []string{
	"x2/chains/star-0/00000000000000000003/00000000000000000017",
	"x0/chains/star-0/00000000000000000003/00000000000000000018",
	"x1/chains/star-0/00000000000000000003/00000000000000000018",
	"x2/chains/star-0/00000000000000000003/00000000000000000018",
	"x0/chains/star-0/00000000000000000003/00000000000000000019",
	"x1/chains/star-0/00000000000000000003/00000000000000000019",
	"x2/chains/star-0/00000000000000000003/00000000000000000019",
	"x0/chains/star-0/00000000000000000003/00000000000000000020",
	"x1/chains/star-0/00000000000000000003/00000000000000000048",
}

func (w *world) checkEpoch3(t *testing.T) {
	t.Helper()
	key := func(s uint64) string { return format.SlotKey("star-0", 3, s) }
	for s := uint64(15); s < 17; s++ {
		if !has(w.xs[0], key(s)) || !has(w.xs[1], key(s)) {
			t.Errorf("committed slot %d below the cut was deleted", s)
		}
	}
	if !has(w.xs[0], key(17)) || !has(w.xs[1], key(17)) {
		t.Error("poison deleted")
	}
	if !has(w.xs[2], key(21)) || !has(w.xs[1], key(22)) || !has(w.xs[1], key(49)) {
		t.Error("junk, a foreign flight or a slot outside the window was deleted")
	}
	for _, d := range epoch3Deleted {
		b, k, _ := strings.Cut(d, "/")
		if has(w.xs[b[1]-'0'], k) {
			t.Errorf("%s still there", d)
		}
	}
	if !has(w.xs[0], format.SlotKey("star-0", 4, 0)) {
		t.Error("current epoch touched")
	}
}

func TestFenceEventFixture(t *testing.T) {
	w := newWorld(t)
	out, err := w.h.Handle(context.Background(), fixture(t, "fence.json"))
	if err != nil {
		t.Fatal(err)
	}
	res := out.(Result)
	if !slices.Equal(res.Deleted, epoch3Deleted) {
		t.Errorf("deleted\n%v\nwant\n%v", res.Deleted, epoch3Deleted)
	}
	if res.Chain != "star-0/express" || res.Cut != 17 || res.Window != 32 || res.Poisons != 2 || len(res.Junk) != 2 {
		t.Errorf("result %+v", res)
	}
	w.checkEpoch3(t)
	// Idempotent: a rerun deletes nothing and reports the same kept objects.
	w.deletes = nil
	out, err = w.h.Handle(context.Background(), fixture(t, "fence.json"))
	if err != nil || len(out.(Result).Deleted) != 0 || len(w.deletes) != 0 || out.(Result).Poisons != 2 {
		t.Fatalf("rerun: %+v %v, deletes %v", out, err, w.deletes)
	}
	w.checkEpoch3(t)
}

func TestEventBridgeFenceFixture(t *testing.T) {
	w := newWorld(t)
	out, err := w.h.Handle(context.Background(), fixture(t, "eventbridge-fence.json"))
	if err != nil {
		t.Fatal(err)
	}
	if res := out.(Result); len(res.Deleted) != len(epoch3Deleted) {
		t.Errorf("deleted %v", res.Deleted)
	}
	w.checkEpoch3(t)
}

func TestSQSFixture(t *testing.T) {
	w := newWorld(t)
	out, err := w.h.Handle(context.Background(), fixture(t, "sqs.json"))
	if err != nil {
		t.Fatal(err)
	}
	resp := out.(events.SQSEventResponse)
	var failed []string
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	// The malformed message and the one with a wrong cut fail; the others succeed.
	want := []string{"0b8a3b3e-0003-4c1e-9a55-000000000003", "0b8a3b3e-0004-4c1e-9a55-000000000004"}
	if !slices.Equal(failed, want) {
		t.Fatalf("failures %v, want %v", failed, want)
	}
	w.checkEpoch3(t)
	// The EventBridge-wrapped standard event ran: slots 2..3 of epoch 1.
	key := func(s uint64) string { return format.SlotKey("star-0", 1, s) }
	if !has(w.std, key(1)) || !has(w.std, key(2)) || has(w.std, key(3)) || !has(w.std, key(4)) {
		t.Errorf("standard: %v", w.std.Keys())
	}
	// The response marshals as Lambda expects.
	b, _ := json.Marshal(resp)
	if !strings.Contains(string(b), `"batchItemFailures":[{"itemIdentifier":"0b8a3b3e-0003`) {
		t.Errorf("response %s", b)
	}
}

func TestScheduledFixture(t *testing.T) {
	w := newWorld(t)
	out, err := w.h.Handle(context.Background(), fixture(t, "scheduled.json"))
	if err != nil {
		t.Fatal(err)
	}
	rep := out.(SweepReport)
	var probed []string
	for _, p := range rep.Probes {
		probed = append(probed, fmt.Sprintf("%s@%d/%d+%d:%d", p.Chain, p.Epoch, p.Cut, p.Window, len(p.Deleted)))
	}
	want := []string{"star-0/standard@1/2+2:1", "star-0/express@3/17+32:9", "star-0/express@1/5+4:1"}
	if !slices.Equal(probed, want) {
		t.Errorf("probed %v, want %v", probed, want)
	}
	w.checkEpoch3(t)
	if has(w.xs[0], format.SlotKey("star-0", 1, 8)) || !has(w.xs[1], format.SlotKey("star-0", 1, 5)) {
		t.Error("express epoch 1")
	}
	if rep.OrphanCount != 1 || !slices.Equal(rep.Orphans, []string{format.SettledKey(streamA, 10, 19)}) || !slices.Equal(rep.Unparsed, []string{"streams/garbage"}) {
		t.Errorf("orphans %+v", rep)
	}
	if w.settled.Len() != 3 {
		t.Error("the report deleted settled objects")
	}
	// A shallow sweep only looks one epoch number down: express 3 only.
	w.h.SweepEpochs = 1
	rep, err = w.h.Sweep(context.Background())
	if err != nil || len(rep.Probes) != 2 || rep.Probes[1].Epoch != 3 {
		t.Errorf("shallow sweep %+v %v", rep.Probes, err)
	}
}

func TestProbeRefuses(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		setup func(w *world)
		ev    FenceEvent
		want  error
	}{
		{"active epoch", nil, FenceEvent{Star: "star-0", Class: "express", Epoch: 4, Cut: 0}, ErrNotFenced},
		{"no epoch", nil, FenceEvent{Star: "star-0", Class: "express", Epoch: 2, Cut: 0}, ErrNotFenced},
		{"cut mismatch", nil, FenceEvent{Star: "star-0", Class: "express", Epoch: 3, Cut: 16}, ErrCutMismatch},
		{"unknown chain", nil, FenceEvent{Star: "star-9", Class: "express", Epoch: 3, Cut: 17}, ErrUnknownChain},
		{"bad class", nil, FenceEvent{Star: "star-0", Class: "gold", Epoch: 3, Cut: 17}, ErrEvent},
		{"cut not dead", func(w *world) {
			w.xs[1].Delete(ctx, format.SlotKey("star-0", 3, 17))
		}, FenceEvent{Star: "star-0", Class: "express", Epoch: 3, Cut: 17}, ErrCutNotDead},
		{"set mismatch", func(w *world) {
			s := w.h.Sets[express]
			s.Buckets = []objstore.Bucket{s.Buckets[0], s.Buckets[2], s.Buckets[1]}
			w.h.Sets[express] = s
		}, FenceEvent{Star: "star-0", Class: "express", Epoch: 3, Cut: 17}, ErrSetMismatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			if c.setup != nil {
				c.setup(w)
			}
			before := len(w.xs[0].Keys()) + len(w.xs[1].Keys()) + len(w.xs[2].Keys())
			_, err := w.h.Probe(ctx, c.ev)
			if !errors.Is(err, c.want) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
			if len(w.deletes) != 0 || len(w.xs[0].Keys())+len(w.xs[1].Keys())+len(w.xs[2].Keys()) != before {
				t.Errorf("deleted %v", w.deletes)
			}
		})
	}
}

func TestProbeBucketDown(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	ev := FenceEvent{Star: "star-0", Class: "express", Epoch: 3, Cut: 17, Window: 32}
	// x2 down: the cut is still provably dead (x0, x1), the others are cleaned,
	// and the error asks for a retry.
	w.xinj[2].SetDown(true)
	res, err := w.h.Probe(ctx, ev)
	if !errors.Is(err, objstore.ErrUnavailable) || len(res.Deleted) != 6 {
		t.Fatalf("down: %d deleted, %v", len(res.Deleted), err)
	}
	t.Logf("error: %v", err)
	w.xinj[2].SetDown(false)
	res, err = w.h.Probe(ctx, ev)
	if err != nil || len(res.Deleted) != 3 {
		t.Fatalf("retry: %v %v", res.Deleted, err)
	}
	w.checkEpoch3(t)
	// Two down: the cut cannot be shown dead; nothing is deleted.
	w = newWorld(t)
	w.xinj[0].SetDown(true)
	w.xinj[1].SetDown(true)
	if _, err := w.h.Probe(ctx, ev); !errors.Is(err, ErrCutNotDead) || len(w.deletes) != 0 {
		t.Fatalf("two down: %v, deleted %v", err, w.deletes)
	}
}

func TestParseFenceEvent(t *testing.T) {
	e, err := ParseFenceEvent(fixture(t, "fence.json"))
	if err != nil || e != (FenceEvent{Star: "star-0", Class: "express", Epoch: 3, Cut: 17, Window: 32}) {
		t.Fatalf("%+v %v", e, err)
	}
	for _, s := range []string{`{`, `{"star":"","class":"express","epoch":3}`, `{"star":"s","class":"x","epoch":3}`,
		`{"star":"s","class":"express","epoch":0}`, `{"star":"s","class":"express","epoch":1,"window":-1}`} {
		if _, err := ParseFenceEvent([]byte(s)); !errors.Is(err, ErrEvent) {
			t.Errorf("%s: %v", s, err)
		}
	}
	if _, err := newWorld(t).h.Handle(context.Background(), json.RawMessage(`{"hello":1}`)); !errors.Is(err, ErrEvent) {
		t.Errorf("unknown shape: %v", err)
	}
}

func TestOrphans(t *testing.T) {
	ids := []format.StreamID{{1}, {2}}
	k := func(i int, f, l uint64) string { return format.SettledKey(ids[i], f, l) }
	// Stream 0 has 1200 refs (more than a page), each with its own settled object.
	var refs0 []metastore.Ref
	var keys []string
	for s := uint64(0); s < 1200; s++ {
		refs0 = append(refs0, metastore.Ref{StreamID: ids[0].String(), FirstSeq: s, LastSeq: s, Locations: []metastore.Location{{Settled: true, Key: k(0, s, s)}}})
		keys = append(keys, k(0, s, s))
	}
	keys = append(keys, k(0, 5, 6), k(1, 0, 3), "streams/x/y", "streams/"+ids[1].String()+"/1-2")
	calls := 0
	lookup := func(_ context.Context, id string, from uint64, limit int) ([]metastore.Ref, error) {
		calls++
		if id != ids[0].String() {
			return nil, nil
		}
		var out []metastore.Ref
		for _, r := range refs0 {
			if r.LastSeq >= from && len(out) < limit {
				out = append(out, r)
			}
		}
		return out, nil
	}
	orphans, unparsed, err := Orphans(context.Background(), keys, lookup)
	if err != nil {
		t.Fatal(err)
	}
	// Stream 0: pages of 500, 500, 200 and the empty page that ends them
	// (a short page is not the end); stream 1: one empty page.
	if !slices.Equal(orphans, []string{k(0, 5, 6), k(1, 0, 3)}) || len(unparsed) != 2 || calls != 5 {
		t.Errorf("orphans %v unparsed %v calls %d", orphans, unparsed, calls)
	}
	boom := errors.New("boom")
	if _, _, err := Orphans(context.Background(), keys, func(context.Context, string, uint64, int) ([]metastore.Ref, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("lookup error: %v", err)
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	base := map[string]string{
		"STRAND_TABLE": "strand", "STRAND_STAR_IDS": "star-0, star-1", "STRAND_EXPRESS_BUCKETS": "a--x-s3,b--x-s3,c--x-s3",
		"STRAND_STANDARD_BUCKET": "std", "STRAND_SETTLED_BUCKET": "settled", "STRAND_EXPRESS_W": "2",
	}
	c, err := ConfigFromEnv(env(base))
	if err != nil {
		t.Fatal(err)
	}
	if c.Table != "strand" || !slices.Equal(c.Stars, []string{"star-0", "star-1"}) || len(c.ExpressBuckets) != 3 || c.ExpressW != 2 || c.SweepEpochs != DefaultSweepEpochs {
		t.Errorf("%+v", c)
	}
	opened := 0
	sets := c.Sets(func(n string) objstore.Bucket { opened++; return objstore.NewMem(n) })
	if len(sets) != 4 || opened != 4 {
		t.Fatalf("%d sets, %d buckets opened", len(sets), opened)
	}
	for id, s := range sets {
		if s.Star != id.Star || s.Validate() != nil {
			t.Errorf("set %s: %+v", id, s)
		}
	}
	for name, mod := range map[string]map[string]string{
		"no table":  {"STRAND_TABLE": ""},
		"no stars":  {"STRAND_STAR_IDS": ""},
		"bad W":     {"STRAND_EXPRESS_W": "4"},
		"W not int": {"STRAND_EXPRESS_W": "two"},
		"no bucket": {"STRAND_EXPRESS_BUCKETS": "", "STRAND_STANDARD_BUCKET": ""},
		"bad star":  {"STRAND_STAR_IDS": "a#b"},
		"bad path":  {"STRAND_S3_PATH_STYLE": "maybe"},
		"bad sweep": {"STRAND_PROBE_SWEEP_EPOCHS": "0"},
		"bad grace": {"STRAND_PROBE_ORPHAN_GRACE": "5s"},
		"no grace":  {"STRAND_PROBE_ORPHAN_GRACE": "soon"},
	} {
		kv := map[string]string{}
		for k, v := range base {
			kv[k] = v
		}
		for k, v := range mod {
			kv[k] = v
		}
		if _, err := ConfigFromEnv(env(kv)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if c.OrphanGrace != DefaultOrphanGrace {
		t.Errorf("default grace %v", c.OrphanGrace)
	}
	for v, want := range map[string]time.Duration{"off": -1, "90m": 90 * time.Minute} {
		base["STRAND_PROBE_ORPHAN_GRACE"] = v
		if c, err := ConfigFromEnv(env(base)); err != nil || c.OrphanGrace != want {
			t.Errorf("grace %q: %v %v", v, c.OrphanGrace, err)
		}
	}
	delete(base, "STRAND_PROBE_ORPHAN_GRACE")
	base["STRAND_STAR_IDS"], base["STRAND_STARS"] = "", "star-2"
	if c, err := ConfigFromEnv(env(base)); err != nil || !slices.Equal(c.Stars, []string{"star-2"}) {
		t.Errorf("STRAND_STARS: %+v %v", c.Stars, err)
	}
}

// TestNothingStartsWithinDeadlineMargin: with less than the margin left
// before the invocation's deadline, no probe starts: every SQS message is
// reported failed (redelivered, not timed out with the batch) and a sweep
// reports absorb.ErrMargin; nothing is deleted. Regression test: it failed
// before the margin (the probes ran into the deadline).
func TestNothingStartsWithinDeadlineMargin(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), absorb.DefaultMargin/2)
	defer cancel()
	out, err := w.h.Handle(ctx, fixture(t, "sqs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(fixture(t, "sqs.json"), &ev); err != nil {
		t.Fatal(err)
	}
	if resp := out.(events.SQSEventResponse); len(resp.BatchItemFailures) != len(ev.Records) {
		t.Fatalf("%d failures, want all %d messages", len(resp.BatchItemFailures), len(ev.Records))
	}
	if _, err := w.h.Handle(ctx, fixture(t, "scheduled.json")); !errors.Is(err, absorb.ErrMargin) {
		t.Fatalf("sweep within the margin: %v, want absorb.ErrMargin", err)
	}
	if len(w.deletes) != 0 {
		t.Fatalf("deleted %v within the margin", w.deletes)
	}
}

// TestQuietSweep: a probe that deletes nothing and finds nothing logs at
// debug, one that deletes logs at info. Issue 34: strand dev logged
// "probe: epoch probed ... poisons=2" at info every 30 s after a restart,
// once more per restart.
func TestQuietSweep(t *testing.T) {
	w := newWorld(t)
	var buf bytes.Buffer
	w.h.Log = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if _, err := w.h.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "probe: epoch probed") || !strings.Contains(buf.String(), "deleted=1") {
		t.Fatalf("the first sweep, which deletes, logged %q", buf.String())
	}
	buf.Reset()
	if _, err := w.h.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The world keeps junk in express epoch 3: that probe still speaks.
	for l := range strings.Lines(buf.String()) {
		if strings.Contains(l, "epoch probed") && strings.Contains(l, "junk=0 ") {
			t.Fatalf("a probe with nothing to do logged at info: %q", l)
		}
	}
	if !strings.Contains(buf.String(), "junk=2") {
		t.Fatalf("the probe that finds junk is silent: %q", buf.String())
	}
}
