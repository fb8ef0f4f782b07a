package sim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
	"github.com/strandlog/strand/shared/star"
)

var (
	edgeSeedsFlag = flag.Int("edge-seeds", 6, "seeds of TestSimEdges (seeds 1..n; -seed replays one)")
	edgeStepsFlag = flag.Int("edge-steps", 150, "steps per seed of TestSimEdges")
	edgeKillFlag  = flag.Int("edge-kill-every", 10, "TestSimEdges arms a kill at a write one step in this many (0: never)")
)

var edgeTotals struct {
	seeds, acked, unknown, closed, restarts, deletions, recreations, readOnly, trimmedChecked, probes atomic.Int64
}

// TestSimEdges is issue 13's workload: what production runs at once, at the
// edges. Streams with short retention (trim's retention fires), stream
// deletion and re-creation under the same name, settle (merging small
// objects), trim and the garbage probe (orphan grace of a nanosecond)
// racing each other and the absorb with seeded delays on their metastore
// calls, the star closed and restarted at random steps, producers that
// retry ambiguous appends (half the streams with match_seq_num, half
// without), every bucket going read-only for a while, and the star killed
// in the middle of one of its or its absorb's writes (edges_kill_test.go).
// One seed drives the workload, the faults and the timing; time is
// virtual.
//
// A seed does not replay exactly: it picks the same actions and draws,
// but not in the same order. The bubble (testing/synctest) makes time
// virtual, not scheduling: the goroutines runnable at one virtual instant
// (four producers, the star's flushers and absorb, settle, trim and the
// probe loops) run in the Go scheduler's order, and they draw from shared
// seeded sources (each bucket's objstore.Injector, each MetaFaults, the
// world's rand), so which call gets which latency or lost answer differs
// from run to run, and the runs diverge (seed 2 alone: a different
// count of metastore writes each run). A failure's command reruns its
// seed's workload, not its interleaving: run it with -count to look for
// the failure again. An exact replay would take one scheduler for the
// whole bubble (or a source per caller with a fixed call order), which
// this harness does not have.
//
// After every step, against the producers' own book of acknowledgements
// (never the system's state):
//
//   - a stream's next seq never decreases, and is never below a seq it
//     acknowledged; a start opens it at or above the tail the killed
//     incarnation acknowledged, and a successor's recovery, probed every
//     few virtual ms, at or above every seq absorbed
//     (edges_recovery_test.go);
//   - no seq is ever read with two different records;
//   - every acknowledged record is readable, with its body, until
//     retention removes it (its timestamp is older than the retention) or
//     its stream is deleted;
//   - a record is read at a seq other than its acknowledged one only if
//     an attempt of its batch ended with star.ErrOutcomeUnknown (or is
//     still pending): a batch reported not written was not written;
//   - a match_seq_num append lands exactly at the seq it matched;
//   - no metastore write went over a DynamoDB limit (SizeGuard).
func TestSimEdges(t *testing.T) {
	seeds := budgetSeeds(*edgeSeedsFlag)
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runEdges(t, seed, *edgeStepsFlag) })
		})
	}
	t.Logf("SUMMARY edges: seeds=%d batches_acked=%d outcome_unknown=%d closed_not_written=%d restarts=%d deletions=%d recreations=%d read_only_spells=%d trimmed_records_checked=%d recoveries_probed=%d kills_at_a_write=%d/%d/%d/%d (slot put, pass index put, absorb metastore write, star metastore write)",
		edgeTotals.seeds.Load(), edgeTotals.acked.Load(), edgeTotals.unknown.Load(), edgeTotals.closed.Load(), edgeTotals.restarts.Load(), edgeTotals.deletions.Load(),
		edgeTotals.recreations.Load(), edgeTotals.readOnly.Load(), edgeTotals.trimmedChecked.Load(), edgeTotals.probes.Load(),
		edgeKills[killSlot].Load(), edgeKills[killPass].Load(), edgeKills[killAbsorbMeta].Load(), edgeKills[killStarMeta].Load())
	// The workload must do what it is for.
	if len(seeds) > 1 && !t.Failed() && (edgeTotals.restarts.Load() == 0 || edgeTotals.deletions.Load() == 0 ||
		edgeTotals.recreations.Load() == 0 || edgeTotals.readOnly.Load() == 0 || edgeTotals.trimmedChecked.Load() == 0 || edgeTotals.unknown.Load() == 0 ||
		edgeTotals.probes.Load() == 0 || *edgeKillFlag > 0 && edgeKills[killSlot].Load()+edgeKills[killPass].Load()+edgeKills[killAbsorbMeta].Load() == 0) {
		t.Fatalf("%d seeds and the workload missed an edge (a zero in the summary above)", len(seeds))
	}
}

// Stream life.
const (
	live = iota
	deleting
	gone
)

// edgeBatch is one producer batch over all its attempts.
type edgeBatch struct {
	id     int
	bodies []string
	start  int64 // ms at the first attempt: a lower bound of its records' timestamps
	maybe  int   // attempts that may have landed (pending, or outcome unknown)
	acked  bool
	first  uint64
}

// edgeStream is one incarnation of a stream name, and its book.
type edgeStream struct {
	slot      int
	name      string
	gen       int
	id        format.StreamID
	meta      metastore.Stream
	retention int64 // ms; 0 keeps forever
	match     bool  // the producer appends with match_seq_num
	state     int

	book    map[uint64]string     // acked seq -> body
	ackedAt map[uint64]int64      // acked seq -> lower bound of its timestamp
	seen    map[uint64]string     // every seq ever read -> body
	owner   map[string]*edgeBatch // body -> batch
	index   map[string]int        // body -> its index in the batch
	maxTail uint64
	maxGen  int    // the star incarnation that reported maxTail
	opened  string // what the last incarnation to open it recovered
	// killedTail: the acknowledged tail of the incarnation killedGen
	// when it was killed; killedLow: the lowest seq its flight index held
	// then (edges_recovery_test.go).
	killedTail, killedLow uint64
	killedGen             int
	batches               int
	cur                   *edgeBatch // the batch being (re)tried
	expect                uint64     // match mode: the tail the producer expects
}

type edges struct {
	t     *testing.T
	seed  int64
	w     *World
	guard *SizeGuard
	rng   *rand.Rand

	mu       sync.Mutex
	node     *Node
	gen      int
	slots    []*edgeStream // current incarnation per name
	old      []*edgeStream // deleted incarnations, until their metadata is gone
	step     int
	readOnly int // step at which the read-only spell ends (0: writable)

	settleMeta, trimMeta, probeMeta *MetaFaults
	win                             *passindex.Window // the checks' (nil in refs mode)
	errs                            chan error
	probes                          int // recoveries probeRecovery checked
	// life serializes the star's kills and starts (the steps', the
	// killer's); a channel, not a mutex, so that a goroutine waiting on
	// it is durably blocked (testing/synctest).
	life     chan struct{}
	killer   *killer
	killRng  *rand.Rand // arms the kills at a write
	killedAt string     // what the last kill struck
}

func (e *edges) fail(err error) {
	select {
	case e.errs <- err:
	default:
	}
}

func (e *edges) fatalf(format string, args ...any) {
	e.t.Helper()
	e.t.Fatalf("seed=%d step=%d: %s\nrerun (not an exact replay: see TestSimEdges): go test ./tests/sim -run TestSimEdges -seed=%d -edge-steps=%d -count=50", e.seed, e.step,
		fmt.Sprintf(format, args...), e.seed, *edgeStepsFlag)
}

func runEdges(t *testing.T, seed int64, steps int) {
	opt := DefaultOptions()
	opt.Streams = 0 // created here, with retention
	opt.BacklogFlights = 32
	opt.HaltWait = time.Second
	opt.PassIndex = seed%2 == 0 // refs and the pass index (design 014)
	w, err := NewWorld(seed, opt)
	if err != nil {
		t.Fatal(err)
	}
	e := &edges{t: t, seed: seed, w: w, rng: rand.New(rand.NewPCG(uint64(seed), 0xed9e)), errs: make(chan error, 16),
		life: make(chan struct{}, 1), killer: newKiller(seed), killRng: rand.New(rand.NewPCG(uint64(seed), 0x4b12))}
	w.OnRecover = e.recovered
	e.win = w.Window(w.Meta, w.SettledMem)
	// Every writer sees the metastore through the size guard.
	e.guard = NewSizeGuard(w.Meta)
	w.StarMeta = NewMetaFaults(e.guard, seed*7+1)
	e.settleMeta = NewMetaFaults(e.guard, seed*7+3)
	e.trimMeta = NewMetaFaults(e.guard, seed*7+4)
	e.probeMeta = NewMetaFaults(e.guard, seed*7+5)
	w.SettleMeta = NewMetaFaults(e.guard, seed*7+2) // the absorb's
	for _, m := range []*MetaFaults{w.StarMeta, e.settleMeta, e.trimMeta, e.probeMeta, w.SettleMeta} {
		m.SetShortPages(0.3) // as NewWorld: pages of refs end short
	}
	e.killer.install(e)
	// Calls take time and some answers are lost (the put landed or not;
	// the star reads back), so a Close finds flights in the air, some
	// already at W copies.
	for _, in := range w.Inj {
		if err := in.SetLatency(3*time.Millisecond, 80*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if err := in.SetAmbiguous(0.05, 0.02); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		es := &edgeStream{slot: i, name: fmt.Sprintf("e%d", i), match: i%2 == 1}
		if i < 3 {
			es.retention = int64(200 + e.rng.IntN(800))
		}
		if err := e.create(es); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	defer func() {
		// On a failure too: stop everything so the bubble can end.
		cancel()
		e.kill()
		bg.Wait()
	}()
	if err := e.restartRetrying(ctx); err != nil {
		t.Fatalf("seed %d: the first star did not start: %v", seed, err)
	}
	e.settlement(ctx, &bg)
	for i := range e.slots {
		bg.Go(func() { e.produce(ctx, i) })
	}
	bg.Go(func() { e.probeRecovery(ctx, seed) })
	bg.Go(func() { e.killer.run(ctx, e) })
	for e.step = 0; e.step < steps; e.step++ {
		func() {
			e.life <- struct{}{}
			defer func() { <-e.life }() // on a failure too: the killer waits on it
			e.act(ctx)
		}()
		if k := 1 + e.killRng.IntN(killKinds-1); *edgeKillFlag > 0 && e.killRng.IntN(*edgeKillFlag) == 0 {
			e.killer.armed.Store(int32(k)) // the next such write kills
		}
		if e.rng.IntN(8) == 0 {
			time.Sleep(time.Duration(200+e.rng.IntN(1200)) * time.Millisecond) // retention fires
		} else {
			time.Sleep(time.Duration(1+e.rng.IntN(40)) * time.Millisecond)
		}
		synctest.Wait()
		select {
		case err := <-e.errs:
			e.fatalf("%v", err)
		default:
		}
		e.check(ctx)
	}
	// Writable again, the star up: everything acknowledged is still there.
	e.killer.armed.Store(killNone)
	e.life <- struct{}{}
	defer func() { <-e.life }()
	e.setReadOnly(false)
	if e.node == nil {
		if err := e.restartRetrying(ctx); err != nil {
			e.fatalf("restart at the end: %v", err)
		}
	}
	time.Sleep(3 * time.Second)
	synctest.Wait()
	e.check(ctx)
	edgeTotals.seeds.Add(1)
	writes, maxRef, maxTx := e.guard.Stats()
	e.mu.Lock()
	probes := e.probes
	e.mu.Unlock()
	t.Logf("seed=%d: %d metastore writes, largest ref %d bytes, largest PutRefs %d bytes, %d tail recoveries probed", seed, writes, maxRef, maxTx, probes)
}

// create creates es's stream (a new id under its name) and makes it the
// slot's incarnation.
func (e *edges) create(es *edgeStream) error {
	if _, err := io.ReadFull(rand.NewChaCha8([32]byte{byte(e.seed), byte(e.seed >> 8), byte(es.slot), byte(es.gen), 0xed}), es.id[:]); err != nil {
		return err
	}
	st := metastore.Stream{Name: es.name, ID: es.id.String(), Class: metastore.Express, Star: StarID, State: metastore.StreamActive, RetentionMs: es.retention}
	got, err := e.guard.CreateStream(context.Background(), st)
	if err != nil {
		return fmt.Errorf("create %s: %w", es.name, err)
	}
	es.meta = got
	es.book, es.ackedAt, es.seen, es.owner, es.index = map[uint64]string{}, map[uint64]int64{}, map[uint64]string{}, map[string]*edgeBatch{}, map[string]int{}
	es.state = live
	if es.slot < len(e.slots) {
		e.slots[es.slot] = es
	} else {
		e.slots = append(e.slots, es)
	}
	e.syncWorld()
	return nil
}

// syncWorld makes the world's stream list the live streams, the ones a
// new incarnation opens (StartNode).
func (e *edges) syncWorld() {
	e.w.Streams, e.w.IDs = nil, nil
	for _, es := range e.slots {
		if es.state == live {
			e.w.Streams = append(e.w.Streams, es.meta)
			e.w.IDs = append(e.w.IDs, es.id)
		}
	}
}

// recovered notes, for the tail checks' reports, what a starting
// incarnation recovered a stream's tail from (World.OnRecover).
func (e *edges) recovered(_ int, info star.StreamInfo, floor uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, es := range e.slots {
		if es.id != info.ID {
			continue
		}
		es.opened = fmt.Sprintf("incarnation %d recovered next seq %d from its last part or ref, floor %d", e.gen, info.Next, floor)
		if max(info.Next, floor) < es.maxTail {
			// Below a tail an incarnation reported: what each source says
			// now (settle and trim keep running), for the failure's report.
			ref, rerr := e.w.Meta.LastRef(context.Background(), es.id.String())
			h, herr := e.w.Meta.GetHead(context.Background(), Chain)
			es.opened += fmt.Sprintf(", below the %d reported before; now its last ref %d..%d (%v), head %+v (%v)", es.maxTail, ref.FirstSeq, ref.LastSeq, rerr, h, herr)
		}
	}
}

// kill closes the running incarnation at once, if there is one.
func (e *edges) kill() bool {
	e.mu.Lock()
	n := e.node
	e.node = nil
	e.killedAt = "between steps"
	e.mu.Unlock()
	e.killer.running.Store(false)
	if n != nil {
		n.Kill()
		e.mu.Lock()
		e.killedTails(n)
		e.mu.Unlock()
	}
	return n != nil
}

// restart starts a new star incarnation (the old one is closed).
func (e *edges) restart(ctx context.Context) error {
	e.mu.Lock()
	e.gen++
	gen := e.gen
	e.syncWorld()
	e.mu.Unlock()
	e.killer.running.Store(false) // a start's writes run on ctx, which no kill ends
	n, err := e.w.StartNode(ctx, gen, 20*time.Millisecond)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.node = n
	e.checkOpened(ctx, n)
	e.mu.Unlock()
	e.killer.running.Store(true)
	return nil
}

// restartRetrying restarts until a start succeeds (a start fails when
// lost answers leave fewer than W buckets through the star's
// conditional-write probe), at most 50 times.
func (e *edges) restartRetrying(ctx context.Context) error {
	var err error
	for range 50 {
		if err = e.restart(ctx); err == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return err
}

// settlement runs settle, trim (slots and streams) and the probe in their
// own loops, each with its own seeded pauses, racing each other and the
// absorb. Their errors are expected under faults; what they did wrong
// shows in the invariants.
func (e *edges) settlement(ctx context.Context, bg *sync.WaitGroup) {
	settler := e.w.Settler()
	settler.Meta = e.settleMeta
	settler.MergeBelowBytes, settler.MaxObjectBytes = 4<<10, 16<<10
	trimmer := e.w.Trimmer()
	trimmer.Meta = e.trimMeta
	// Settle and trim read the chain without the star's latency and lost
	// answers (they would only slow settlement down, and with it the
	// merges that race trim); the settled bucket keeps its faults.
	settler.Sets.Express, trimmer.Sets.Express = e.w.RawSet(), e.w.RawSet()
	prober := e.w.Prober()
	prober.Meta = e.probeMeta
	loops := []func(context.Context) error{
		func(ctx context.Context) error { _, err := settler.Run(ctx, Chain); return err },
		func(ctx context.Context) error { _, err := trimmer.Run(ctx, Chain); return err },
		func(ctx context.Context) error { _, err := trimmer.Streams(ctx); return err },
		func(ctx context.Context) error { _, err := prober.Sweep(ctx); return err },
	}
	for i, run := range loops {
		rng := rand.New(rand.NewPCG(uint64(e.seed), 0x5e77+uint64(i)))
		bg.Go(func() {
			for ctx.Err() == nil {
				_ = run(ctx)
				time.Sleep(time.Duration(1+rng.IntN(15)) * time.Millisecond)
			}
		})
	}
}

// produce is the producer of one stream slot: one batch at a time, retried
// until it is acknowledged (or, with match_seq_num, known to have landed).
func (e *edges) produce(ctx context.Context, slot int) {
	rng := rand.New(rand.NewPCG(uint64(e.seed), 0x9a0d+uint64(slot)))
	for ctx.Err() == nil {
		time.Sleep(time.Duration(2+rng.IntN(20)) * time.Millisecond)
		e.mu.Lock()
		es, n := e.slots[slot], e.node
		if es.state != live || n == nil {
			e.mu.Unlock()
			continue
		}
		b := es.cur
		if b == nil {
			es.batches++
			b = &edgeBatch{id: es.batches, start: time.Now().UnixMilli()}
			for j := range 1 + rng.IntN(8) {
				body := fmt.Sprintf("%s.%d/b%d/r%d/%s", es.name, es.gen, b.id, j, filler(rng.IntN(400)))
				b.bodies = append(b.bodies, body)
				es.owner[body], es.index[body] = b, j
			}
			es.cur = b
		}
		b.maybe++
		var opt star.AppendOptions
		expect := es.expect
		if es.match {
			opt.MatchSeq = &expect
		}
		e.mu.Unlock()

		recs := make([]format.Record, len(b.bodies))
		for j, body := range b.bodies {
			recs[j] = format.Record{Body: []byte(body)}
		}
		var ack star.Ack
		p, err := n.Star.Submit(ctx, es.id, recs, opt)
		if err == nil {
			ack, err = p.Wait(context.Background()) // bounded by the halt wait and Close
		}

		e.mu.Lock()
		var mis *star.SeqMismatchError
		switch {
		case err == nil:
			b.maybe--
			if es.match && ack.FirstSeq != expect {
				e.fail(fmt.Errorf("%s.%d: batch %d appended with match_seq_num %d landed at %d", es.name, es.gen, b.id, expect, ack.FirstSeq))
			}
			e.landed(es, b, ack.FirstSeq)
		case errors.Is(err, star.ErrOutcomeUnknown):
			edgeTotals.unknown.Add(1) // retried as it is: maybe stays counted
		case errors.As(err, &mis):
			b.maybe--
			if b.maybe > 0 && mis.Tail == expect+uint64(len(b.bodies)) {
				// An earlier attempt's outcome was unknown, and the tail is
				// just past it: that attempt landed (the only writer).
				e.landed(es, b, expect)
			} else {
				es.expect = mis.Tail
			}
		default:
			b.maybe-- // reported not written
			if errors.Is(err, star.ErrClosed) {
				edgeTotals.closed.Add(1)
			}
		}
		e.mu.Unlock()
	}
}

// landed books b as acknowledged at first.
func (e *edges) landed(es *edgeStream, b *edgeBatch, first uint64) {
	b.acked, b.first = true, first
	for j, body := range b.bodies {
		es.book[first+uint64(j)] = body
		es.ackedAt[first+uint64(j)] = b.start
	}
	es.expect = first + uint64(len(b.bodies))
	es.cur = nil
	edgeTotals.acked.Add(1)
}

// act takes one step's action.
func (e *edges) act(ctx context.Context) {
	if e.readOnly > 0 && e.step >= e.readOnly {
		e.setReadOnly(false)
	}
	for _, m := range []*MetaFaults{e.settleMeta, e.trimMeta, e.probeMeta} {
		m.SetDelay(time.Duration(e.rng.IntN(3)) * time.Millisecond)
	}
	e.recreate()
	switch k := e.rng.IntN(40); {
	case k < 3: // Close the star at once, restart it (maybe some steps later)
		if e.kill() {
			edgeTotals.restarts.Add(1)
		}
		if e.readOnly == 0 && e.rng.IntN(2) == 0 {
			if err := e.restart(ctx); err != nil {
				e.t.Logf("seed %d, step %d: restart failed (retried later): %v", e.seed, e.step, err)
			}
		}
	case k < 6 && e.node == nil && e.readOnly == 0:
		if err := e.restart(ctx); err != nil {
			e.t.Logf("seed %d, step %d: restart failed (retried later): %v", e.seed, e.step, err)
		}
	case k < 8: // delete a stream
		e.deleteStream(ctx)
	case k < 9 && e.readOnly == 0: // every bucket read-only for a while
		e.readOnly = e.step + 2 + e.rng.IntN(6)
		e.setReadOnly(true)
		edgeTotals.readOnly.Add(1)
	}
	if e.node == nil && e.readOnly == 0 && e.rng.IntN(3) == 0 {
		if err := e.restart(ctx); err != nil {
			e.t.Logf("seed %d, step %d: restart failed (retried later): %v", e.seed, e.step, err)
		}
	}
}

// setReadOnly makes every bucket refuse writes and deletes (or accept them
// again): a store that became read-only.
func (e *edges) setReadOnly(ro bool) {
	p := 0.0
	if ro {
		p = 1
	} else {
		e.readOnly = 0
	}
	for _, in := range append(append([]*objstore.Injector(nil), e.w.Inj...), e.w.SettledInj) {
		if err := in.SetErrorRate(p, objstore.OpPut, objstore.OpDelete); err != nil {
			e.fatalf("read-only: %v", err)
		}
	}
}

// deleteStream deletes a live stream as the API server does: drain it off
// the star (its last appends absorbed), then mark it deleting; trim
// removes its refs, objects and metadata.
func (e *edges) deleteStream(ctx context.Context) {
	e.mu.Lock()
	n, cands := e.node, e.liveStreams()
	if n == nil || len(cands) < 2 {
		e.mu.Unlock()
		return
	}
	es := cands[e.rng.IntN(len(cands))]
	es.state = deleting // the producer stops
	e.mu.Unlock()
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := n.Star.Drain(dctx, es.id)
	cancel()
	if err == nil {
		err = e.guard.SetStreamState(ctx, es.name, es.id.String(), metastore.StreamDeleting)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		// Nothing deleted: Drain restored the stream, appends resume (the
		// unfaulted metastore does not fail SetStreamState).
		es.state = live
		return
	}
	e.old = append(e.old, es)
	e.syncWorld()
	edgeTotals.deletions.Add(1)
}

// liveStreams is the slots' live incarnations. Called with e.mu held.
func (e *edges) liveStreams() []*edgeStream {
	var out []*edgeStream
	for _, es := range e.slots {
		if es.state == live {
			out = append(out, es)
		}
	}
	return out
}

// recreate re-creates, under the same name, a deleted stream whose
// metadata trim has removed.
func (e *edges) recreate() {
	e.mu.Lock()
	defer e.mu.Unlock()
	keep := e.old[:0]
	for _, es := range e.old {
		_, err := e.w.Meta.GetStream(context.Background(), es.name)
		if !errors.Is(err, metastore.ErrNotFound) || e.node == nil || e.rng.IntN(2) == 0 {
			keep = append(keep, es)
			continue
		}
		es.state = gone
		ns := &edgeStream{slot: es.slot, name: es.name, gen: es.gen + 1, match: es.match, retention: es.retention}
		if err := e.create(ns); err != nil {
			e.fail(err)
			continue
		}
		if err := e.node.Star.Open(star.StreamInfo{ID: ns.id, Class: metastore.Express}); err != nil {
			e.fail(fmt.Errorf("open re-created %s: %w", ns.name, err))
		}
		edgeTotals.recreations.Add(1)
	}
	e.old = keep
}

// check checks every invariant against the book.
func (e *edges) check(ctx context.Context) {
	if bad := e.guard.Violations(); len(bad) > 0 {
		e.fatalf("a metastore write over a DynamoDB limit: %s", strings.Join(bad, "; "))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.node == nil {
		return
	}
	now := time.Now().UnixMilli()
	rd := e.w.Reader(e.node.Star, true)
	for _, es := range e.slots {
		if es.state != live {
			continue
		}
		if e.win != nil {
			e.checkWindowTail(ctx, e.win, es)
		}
		tail, _, err := e.node.Star.Tail(es.id)
		if err != nil {
			continue // drained and not reopened yet
		}
		// Tail is the acknowledged tail (never an admitted batch's): every
		// seq below a tail it reported was acknowledged to some producer,
		// so it never moves backward, across incarnations too. The book
		// first: an acknowledged record lost is the more specific finding.
		if lost := firstAtOrAbove(es.book, tail); lost != nil {
			e.fatalf("%s.%d: next seq %d (star incarnation %d), but seq %d was acknowledged; %s", es.name, es.gen, tail, e.node.Gen, *lost, e.describe(ctx, es))
		}
		if tail < es.maxTail {
			e.fatalf("%s.%d: next seq moved backward from %d (star incarnation %d) to %d (incarnation %d); seqs %d..%d acknowledged to this producer: %d, read: %d; %s",
				es.name, es.gen, es.maxTail, es.maxGen, tail, e.node.Gen, tail, es.maxTail-1,
				countIn(es.book, tail, es.maxTail), countIn(es.seen, tail, es.maxTail), e.describe(ctx, es))
		}
		es.maxTail, es.maxGen = tail, e.node.Gen
		recs, _, err := ReadAll(ctx, rd, es.meta)
		if err != nil {
			e.fatalf("%s.%d: read: %v", es.name, es.gen, err)
		}
		got := map[uint64]bool{}
		for i, r := range recs {
			if i > 0 && r.Seq != recs[i-1].Seq+1 {
				e.fatalf("%s.%d: read seq %d after %d (a hole or a repeat)", es.name, es.gen, r.Seq, recs[i-1].Seq)
			}
			body := string(r.Body)
			if prev, ok := es.seen[r.Seq]; ok && prev != body {
				e.fatalf("%s.%d: seq %d read as %q, earlier as %q", es.name, es.gen, r.Seq, trunc(body), trunc(prev))
			}
			es.seen[r.Seq] = body
			got[r.Seq] = true
			if want, ok := es.book[r.Seq]; ok && want != body {
				e.fatalf("%s.%d: seq %d reads %q, acknowledged %q", es.name, es.gen, r.Seq, trunc(body), trunc(want))
			}
			if es.owner[body] == nil {
				e.fatalf("%s.%d: seq %d reads %q, which no producer of this stream wrote", es.name, es.gen, r.Seq, trunc(body))
			}
		}
		for seq, body := range es.book {
			if got[seq] {
				continue
			}
			if es.retention > 0 && es.ackedAt[seq] < now-es.retention {
				edgeTotals.trimmedChecked.Add(1)
				continue // retention may have removed it
			}
			e.fatalf("%s.%d: acknowledged seq %d (%q, appended at %d ms, now %d, retention %d ms) is not readable",
				es.name, es.gen, seq, trunc(body), es.ackedAt[seq], now, es.retention)
		}
		e.checkExtra(es)
	}
}

// checkWindowTail: with the pass index, a successor recovers a stream's
// tail from its last part in the window when there is one, without
// looking at its refs (passindex.Window.LastRef): so that part must never
// end below its last ref, or a start would reopen the stream below seqs
// it acknowledged. Checked at every step, not only at the few starts.
func (e *edges) checkWindowTail(ctx context.Context, win *passindex.Window, es *edgeStream) {
	part, perr := win.LastRef(ctx, es.meta)
	ref, rerr := e.w.Meta.LastRef(ctx, es.id.String())
	if perr != nil || rerr != nil {
		return // nothing yet, or the window moved under the read
	}
	if part.LastSeq < ref.LastSeq {
		h, _ := e.w.Meta.GetHead(ctx, Chain)
		e.fatalf("%s.%d: a successor would recover next seq %d from the window's last part %d..%d, below the last ref %d..%d (head %+v)",
			es.name, es.gen, part.LastSeq+1, part.FirstSeq, part.LastSeq, ref.FirstSeq, ref.LastSeq, h)
	}
}

// checkExtra: a record read at a seq other than the one its batch was
// acknowledged at came from an attempt whose outcome was unknown; so each
// record appears at most once per such attempt beyond its ack.
func (e *edges) checkExtra(es *edgeStream) {
	at := map[string][]uint64{}
	for seq, body := range es.seen {
		b := es.owner[body]
		if b.acked && b.first+uint64(es.index[body]) == seq {
			continue
		}
		at[body] = append(at[body], seq)
	}
	for body, seqs := range at {
		b := es.owner[body]
		if len(seqs) > b.maybe {
			sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
			first := "never"
			if b.acked {
				first = fmt.Sprint(b.first)
			}
			e.fatalf("%s.%d: batch %d's record %q read at seqs %v besides its ack (at %s), with %d attempts of unknown outcome: an attempt reported not written was written (a duplicate)",
				es.name, es.gen, b.id, trunc(body), seqs, first, b.maybe)
		}
	}
}

// firstAtOrAbove is the least seq of m at or above from, or nil.
func firstAtOrAbove(m map[uint64]string, from uint64) *uint64 {
	var least *uint64
	for seq := range m {
		if seq >= from && (least == nil || seq < *least) {
			least = &seq
		}
	}
	return least
}

// countIn is how many seqs of m are in [from, to).
func countIn(m map[uint64]string, from, to uint64) int {
	n := 0
	for seq := range m {
		if seq >= from && seq < to {
			n++
		}
	}
	return n
}

// budgetSeeds is the seeds of a run: -seed alone if given, else 1..n.
func budgetSeeds(n int) []int64 {
	if *seedFlag != 0 {
		return []int64{*seedFlag}
	}
	seeds := make([]int64, 0, n)
	for i := 1; i <= n; i++ {
		seeds = append(seeds, int64(i))
	}
	return seeds
}

func trunc(s string) string {
	if len(s) > 24 {
		return s[:24] + "…"
	}
	return s
}
