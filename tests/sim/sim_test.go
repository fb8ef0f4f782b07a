package sim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/read"
	"github.com/strandlog/strand/shared/star"
	"github.com/strandlog/strand/tests/promtest"
)

var (
	seedFlag  = flag.Int64("seed", 0, "run only this seed (replay); 0 runs the seed budget")
	seedsFlag = flag.Int("seeds", 100, "how many seeds to run (seeds 1..n)")
	stepsFlag = flag.Int("steps", 150, "steps per seed")
)

// totals over every seed of one run, for the summary line.
var totals struct {
	steps, batches, faults, takeovers, zombies, halts, stalls, reads, corrupt, drains, retries, switches, lostAcks, ranged, probeDeleted, probeDeletedIndexed atomic.Int64

	// records: every seed's record counts, failed seeds included.
	records Totals
}

// TestSim runs the deterministic simulation for each seed of the budget:
// one seed drives the workload, every fault, crash and takeover, and when
// settlement runs; time is virtual (testing/synctest). After every step
// every invariant of DESIGN.md is checked; a failure names its seed and
// step and replays with -seed.
func TestSim(t *testing.T) {
	seeds := []int64{*seedFlag}
	if *seedFlag == 0 {
		seeds = seeds[:0]
		for i := 1; i <= *seedsFlag; i++ {
			seeds = append(seeds, int64(i))
		}
	}
	totals.records.Kind = "seeds"
	for _, seed := range seeds {
		var tl Tally
		ok := t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("seed=%d; replay: go test ./tests/sim -run TestSim -seed=%d -steps=%d -v", seed, seed, *stepsFlag)
			synctest.Test(t, func(t *testing.T) { runSim(t, seed, *stepsFlag, &tl) })
		})
		totals.records.Add(strconv.FormatInt(seed, 10), tl, !ok)
	}
	// The seed budget runs the window past its budget (World.TinyWindow):
	// ranged lookups under every checker, not only in passindex's tests.
	// And the garbage probe deletes orphans with runs, packs and merged
	// runs in the window (settle-probe-race), under checkProbeDeletes.
	if *seedFlag == 0 && *seedsFlag >= 20 {
		if totals.ranged.Load() == 0 {
			t.Errorf("no window lookup ran past its budget in %d seeds (World.TinyWindow)", *seedsFlag)
		}
		if totals.probeDeletedIndexed.Load() == 0 {
			t.Errorf("the garbage probe deleted no orphan on the pass index in %d seeds", *seedsFlag)
		}
	}
	t.Logf("SUMMARY sim: %s steps=%d batches_acked=%d faults_injected=%d takeovers=%d zombie_takeovers=%d epoch_halts=%d backlog_stalls=%d workload_reads=%d corrupted_at_rest=%d graceful_restarts=%d idempotent_retries=%d switched_to_pass_index=%d lost_acks_retried=%d window_ranged_lookups=%d probe_orphans_deleted=%d probe_orphans_deleted_on_pass_index=%d",
		&totals.records, totals.steps.Load(), totals.batches.Load(), totals.faults.Load(), totals.takeovers.Load(),
		totals.zombies.Load(), totals.halts.Load(), totals.stalls.Load(), totals.reads.Load(), totals.corrupt.Load(), totals.drains.Load(), totals.retries.Load(), totals.switches.Load(), totals.lostAcks.Load(), totals.ranged.Load(), totals.probeDeleted.Load(), totals.probeDeletedIndexed.Load())
	t.Logf("SUMMARY sim: carried_marks_checked=%d carried_marks_unverified=%d", carriedChecked.Load(), carriedUnverified.Load())
}

// batch states
const (
	pending = iota
	acked
	failed  // definitely not appended (rejected at admission, or shed by a deposed star)
	unknown // outcome unknown (the star was killed with the batch in flight)
)

type batchRec struct {
	prod, idx, stream int
	bodies            []string
	gen               int
	p                 *star.Pending
	state             int
	ack               star.Ack
	err               error
	retries           int // idempotent retries (idempotent_test.go)
	// lost: the ack the star gave before the sim dropped it at a takeover
	// (loseAcks, idempotent_test.go); the retry must get the same seqs.
	lost *star.Ack
}

type producer struct {
	stream int
	next   int
	busy   bool
	// idem: an idempotent producer (idempotent_test.go): it retries every
	// batch not acked with its producer id and batch seq (= idx).
	idem bool
	pid  format.ProducerID
	// tenant: the producer's AppendOptions.Tenant (three tenants, so a
	// stream is appended by several: the star's per-tenant pool queues
	// must still cut each stream in seq order).
	tenant string
}

type observation struct {
	stream int
	seq    uint64
	body   string
}

type sim struct {
	t    *testing.T
	seed int64
	rng  *rand.Rand
	w    *World
	ctx  context.Context
	// runCtx ends every background run (goRun) when the seed ends.
	runCtx context.Context

	mu      sync.Mutex
	carried carriedState         // checkCarried's memory (carried_test.go)
	batches map[string]*batchRec // by "prod.idx"
	prods   []*producer
	obs     []observation
	wg      sync.WaitGroup // workload goroutines

	node, zombie *Node
	zombieUntil  int
	gen          int
	step         int
	action       string

	// fault bookkeeping: when each timed fault ends (step number)
	until      map[string]int
	bad        int // the bad zone: bucket faults target it (a second zone only goes down)
	releasedAt []metastore.Cursor

	// monotonic metadata
	lastHead metastore.Head
	fenced   map[uint64]uint64 // epoch -> cut
	draining bool              // drain: producers retry, make no new batches
	verified map[string]uint64 // "gen/epoch" -> slots checked below the released head
	// invariant 6 bookkeeping
	starCalls int64
	busy      bool
	myHalts   uint64
	halts     uint64
	epoch0    uint64
	started   bool

	dur   *Durability // invariant 1 read from the raw buckets
	tally Tally       // the last history check's record counts
	// forgetful: the star's dedupe bound is below the idempotent
	// producers, so it forgets some (dedupe_bound_test.go): a retry of an
	// acknowledged batch of a forgotten producer may be written again.
	forgetful bool
	copies    int            // the last history check's extra copies of such batches
	forgot    map[int]uint64 // producers each incarnation forgot under the bound
	// loseAcks: at each takeover the sim drops some acks of the old
	// incarnation's idempotent batches, as a network does, and retries
	// them on the new one (idempotent_test.go); lostAckErrs is what those
	// retries got wrong, reported by check.
	loseAcks    bool
	lostAckErrs []string
}

// runSim runs one seed; tally gets its record counts (from the last
// history check, also when the seed fails).
func runSim(t *testing.T, seed int64, steps int, tally *Tally) {
	runSimWith(t, seed, steps, tally, 6, 0)
}

// runSimWith runs one seed with prods producers (every other one
// idempotent) and the star's dedupe bound (0: the default).
func runSimWith(t *testing.T, seed int64, steps int, tally *Tally, prods, dedupeBound int) {
	opt := DefaultOptions()
	opt.IdleCut = seed%2 == 0   // both cut policies, without drawing from the seed's stream
	opt.PassIndex = seed%4 >= 2 // refs and the pass index (design 014), likewise
	opt.DedupeMaxProducers = dedupeBound
	// Half the refs seeds switch to the pass index mid-run, as a rolling
	// deploy does (design 014, "Switching a live chain"): settlement at a
	// third of the steps, the star (a new incarnation) at half.
	switching := seed%8 >= 4 && !opt.PassIndex
	w, err := NewWorld(seed, opt)
	if err != nil {
		t.Fatal(err)
	}
	s := &sim{t: t, seed: seed, w: w, ctx: context.Background(), rng: rand.New(rand.NewPCG(uint64(seed), 0x5eed)),
		batches: map[string]*batchRec{}, until: map[string]int{}, fenced: map[uint64]uint64{}, verified: map[string]uint64{}, dur: NewDurability(w)}
	s.bad = s.rng.IntN(w.Opt.K)
	for i := range prods {
		s.prods = append(s.prods, newProducer(i, w.Opt.Streams))
	}
	s.forgetful = dedupeBound > 0 && dedupeBound < (prods+1)/2
	s.loseAcks = !s.forgetful && seed%3 == 0
	var stop context.CancelFunc
	s.runCtx, stop = context.WithCancel(context.Background())
	defer func() {
		*tally = s.tally
		// On a failure too: stop every incarnation and every background
		// run, and wait for them, so the bubble ends cleanly and the next
		// seed runs (a failed seed is counted, not a crashed binary).
		stop()
		if s.zombie != nil {
			s.zombie.Kill()
		}
		if s.node != nil {
			s.node.Kill()
		}
		s.wg.Wait()
	}()
	s.restart(false)
	if s.node == nil {
		t.Fatalf("seed %d: the first star did not start", seed)
	}
	for s.step = 0; s.step < steps; s.step++ {
		s.preStep()
		if switching && s.step == steps/3 {
			s.w.SwitchSettlement()
			totals.switches.Add(1)
		}
		if switching && s.step == steps/2 {
			// The refs star absorbs what it released (unsettled refs passes
			// for the switched star's window, unless settle is quicker),
			// then a new incarnation takes over with the switch on.
			if s.node != nil {
				s.appendBurst()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_ = s.w.Absorber().AbsorbTo(ctx, Chain, s.node.Star.Released(Chain)) // faults may stop it: fine
				cancel()
			}
			s.w.SwitchStar()
			s.restart(false)
			s.action = "switch the star to the pass index"
			synctest.Wait()
			s.check()
			continue
		}
		s.action = s.act()
		if s.rng.IntN(8) == 0 {
			time.Sleep(time.Duration(200+s.rng.IntN(2800)) * time.Millisecond)
		} else {
			time.Sleep(time.Duration(1+s.rng.IntN(50)) * time.Millisecond)
		}
		synctest.Wait()
		s.check()
	}
	s.drain()
	dedupeTotals.copies.Add(int64(s.copies))
	for _, n := range s.forgot {
		dedupeTotals.forgot.Add(int64(n))
	}
	totals.steps.Add(int64(steps))
	totals.faults.Add(w.Faults())
	totals.ranged.Add(w.WindowRanged())
	pd, pdi := w.ProbeDeletes.Deleted()
	totals.probeDeleted.Add(pd)
	totals.probeDeletedIndexed.Add(pdi)
	for _, b := range s.batches {
		if b.state == acked {
			totals.batches.Add(1)
		}
	}
	st := w.Logs.Stalls()
	stalls := 0
	for _, n := range st {
		stalls += n
	}
	totals.stalls.Add(int64(stalls))
	t.Logf("seed=%d: steps=%d faults=%d incarnations=%d stalls=%v lines=%d", seed, steps, w.Faults(), s.gen, st, len(w.Logs.Lines()))
}

func (s *sim) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("seed=%d step=%d action=%s: %s\nreplay: go test ./tests/sim -run TestSim -seed=%d -steps=%d -v", s.seed, s.step, s.action,
		fmt.Sprintf(format, args...), s.seed, *stepsFlag)
}

// ---- actions ----

type action struct {
	name   string
	weight int
	do     func()
}

func (s *sim) act() string {
	if s.node == nil {
		s.restart(false)
		return "restart (no star)"
	}
	acts := []action{
		{"append", 40, s.appendBurst},
		{"zone-down", 4, func() { s.timed("down", func() { s.w.Inj[s.bad].SetDown(true) }) }},
		{"two-zones-down", 1, s.twoDown},
		{"slow-zone", 4, func() {
			s.timed("slow", func() { _ = s.w.Inj[s.bad].SetLatency(2*time.Millisecond, 200*time.Millisecond) })
		}},
		{"jitter", 5, func() {
			// Every zone's calls take a random time, so a later slot can
			// reach W copies before an earlier one: acks must still wait.
			s.timed("jitter", func() {
				for _, in := range s.w.Inj {
					_ = in.SetLatency(2*time.Millisecond, 200*time.Millisecond)
				}
			})
		}},
		{"ambiguous-puts", 5, func() { s.w.Inj[s.bad].ForceAmbiguous(1+s.rng.IntN(3), s.rng.IntN(3) > 0) }},
		{"zone-503s", 3, func() { s.timed("errors", func() { _ = s.w.Inj[s.bad].SetErrorRate(0.3) }) }},
		{"corrupt-reads", 3, func() { s.timed("corrupt", func() { _ = s.w.Inj[s.bad].SetCorrupt(0.05, 0.05) }) }},
		{"corrupt-at-rest", 4, s.corruptAtRest},
		{"metastore-down", 3, func() { s.timedFor("meta-down", 4+s.rng.IntN(8), func() { s.w.SettleMeta.SetDown(true) }) }},
		{"metastore-throttled", 3, func() {
			s.timed("meta-throttle", func() { s.w.SettleMeta.SetErrorRate(0.3); s.w.SettleMeta.SetLostAnswers(0.1) })
		}},
		{"star-metastore-down", 2, func() { s.timed("star-meta-down", func() { s.w.StarMeta.SetDown(true) }) }},
		{"settle", 4, func() { s.goRun(func(ctx context.Context) { _, _ = s.w.KeptSettler().Run(ctx, Chain) }) }},
		{"two-settlers", 2, func() {
			// A cold copy racing the long-lived one (its kept state then
			// no longer matches the head: it rebuilds).
			// The cold copy has the other deploy's settle configuration
			// (World.Settler): copies of two builds racing on one step.
			s.goRun(func(ctx context.Context) { _, _ = s.w.KeptSettler().Run(ctx, Chain) })
			s.goRun(func(ctx context.Context) { _, _ = s.w.OtherSettler().Run(ctx, Chain) })
		}},
		{"settle-killed", 4, func() {
			// A copy killed at one of its first PUTs (a pack, the run
			// index, a flush's object), racing the long-lived one.
			k := s.rng.IntN(4)
			s.goRun(func(ctx context.Context) { _, _ = s.w.KilledSettler(k).Run(ctx, Chain) })
		}},
		{"slow-settler", 3, func() {
			d := time.Duration(20+s.rng.IntN(300)) * time.Millisecond
			s.goRun(func(ctx context.Context) { _, _ = s.w.SlowSettler(d).Run(ctx, Chain) })
			s.goRun(func(ctx context.Context) { time.Sleep(d / 2); _, _ = s.w.Settler().Run(ctx, Chain) })
		}},
		{"trim", 3, func() {
			s.goRun(func(ctx context.Context) { _, _ = s.w.Trimmer().Run(ctx, Chain); _, _ = s.w.Trimmer().Streams(ctx) })
		}},
		{"probe-sweep", 2, func() { s.goRun(func(ctx context.Context) { _, _ = s.w.Prober().Sweep(ctx) }) }},
		{"settle-probe-race", 3, func() {
			// The orphan sweep racing settle copies of both configurations
			// (one killed at one of its first PUTs) and trim: on the pass
			// index, with runs, packs and merged runs in the window and
			// flushes writing settled objects the sweep lists.
			k := s.rng.IntN(4)
			s.goRun(func(ctx context.Context) { _, _ = s.w.KilledSettler(k).Run(ctx, Chain) })
			s.goRun(func(ctx context.Context) { _, _ = s.w.Prober().Sweep(ctx) })
			s.goRun(func(ctx context.Context) { _, _ = s.w.KeptSettler().Run(ctx, Chain) })
			s.goRun(func(ctx context.Context) { _, _ = s.w.Prober().Sweep(ctx) })
			s.goRun(func(ctx context.Context) { _, _ = s.w.Trimmer().Run(ctx, Chain) })
		}},
		{"stale-absorb-event", 3, s.staleEvent},
		{"read", 6, s.workloadRead},
		{"crash-takeover", 3, func() { s.restart(false) }},
		{"merge-takeover", 2, s.mergeTakeover},
		{"graceful-restart", 2, s.gracefulRestart},
		{"zombie-takeover", 2, func() { s.restart(true) }},
	}
	total := 0
	for _, a := range acts {
		total += a.weight
	}
	n := s.rng.IntN(total)
	for _, a := range acts {
		if n < a.weight {
			a.do()
			return a.name
		}
		n -= a.weight
	}
	panic("unreachable")
}

// timed starts a fault that ends after 1 to 4 steps (preStep ends it).
func (s *sim) timed(name string, start func()) { s.timedFor(name, 1+s.rng.IntN(4), start) }

func (s *sim) timedFor(name string, steps int, start func()) {
	if _, on := s.until[name]; on {
		return
	}
	start()
	s.until[name] = s.step + steps
}

// preStep ends the faults whose time is up and the zombie's life.
func (s *sim) preStep() {
	for _, name := range slices.Sorted(mapKeys(s.until)) {
		if s.until[name] > s.step {
			continue
		}
		delete(s.until, name)
		switch name {
		case "down":
			s.w.Inj[s.bad].SetDown(false)
		case "down2":
			for i := range s.w.Inj {
				if i != s.bad {
					s.w.Inj[i].SetDown(false)
				}
			}
		case "slow":
			_ = s.w.Inj[s.bad].SetLatency(0, 0)
		case "jitter":
			for _, in := range s.w.Inj {
				_ = in.SetLatency(0, 0)
			}
		case "errors":
			_ = s.w.Inj[s.bad].SetErrorRate(0)
		case "corrupt":
			_ = s.w.Inj[s.bad].SetCorrupt(0, 0)
		case "meta-down":
			s.w.SettleMeta.SetDown(false)
		case "meta-throttle":
			s.w.SettleMeta.SetErrorRate(0)
			s.w.SettleMeta.SetLostAnswers(0)
		case "star-meta-down":
			s.w.StarMeta.SetDown(false)
		}
	}
	if s.zombie != nil && s.step >= s.zombieUntil {
		s.zombie.Kill()
		s.zombie = nil
	}
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// twoDown takes a second zone down with the bad one: W is unreachable, the
// epoch halts after the commit deadline and recovers when they return.
func (s *sim) twoDown() {
	s.timed("down", func() { s.w.Inj[s.bad].SetDown(true) })
	s.timed("down2", func() {
		other := (s.bad + 1) % s.w.Opt.K
		s.w.Inj[other].SetDown(true)
	})
	s.appendBurst()
	time.Sleep(s.w.Opt.CommitDeadline + 100*time.Millisecond) // past the commit deadline: the epoch halts
}

func (s *sim) goRun(fn func(ctx context.Context)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(s.runCtx, time.Minute)
		defer cancel()
		fn(ctx)
	}()
}

// body is the deterministic content of record k of producer p's batch i:
// its identity, then filler derived from it, so any change shows.
func body(p, i, k, size int) string {
	id := fmt.Sprintf("p%d.%d.%d:", p, i, k)
	h := fnv.New64a()
	h.Write([]byte(id))
	r := rand.New(rand.NewPCG(h.Sum64(), 1))
	b := []byte(id)
	for len(b) < size {
		b = append(b, byte('a'+r.IntN(26)))
	}
	return string(b)
}

func parseBody(b string) (p, i, k int, ok bool) {
	head, rest, found := strings.Cut(b, ":")
	if !found || !strings.HasPrefix(head, "p") {
		return 0, 0, 0, false
	}
	parts := strings.Split(head[1:], ".")
	if len(parts) != 3 {
		return 0, 0, 0, false
	}
	var err [3]error
	p, err[0] = strconv.Atoi(parts[0])
	i, err[1] = strconv.Atoi(parts[1])
	k, err[2] = strconv.Atoi(parts[2])
	if err[0] != nil || err[1] != nil || err[2] != nil {
		return 0, 0, 0, false
	}
	return p, i, k, body(p, i, k, len(head)+1+len(rest)) == b
}

func (s *sim) appendBurst() {
	n := s.node
	s.mu.Lock()
	defer s.mu.Unlock()
	for pi, pr := range s.prods {
		if pr.busy || s.rng.IntN(2) == 0 {
			continue
		}
		pr.busy = true
		rs, recs := s.outstanding(pi, pr)
		nb := 1 + s.rng.IntN(6)
		if len(rs) > 0 || s.draining {
			nb = 0
		}
		for range nb {
			idx := pr.next
			pr.next++
			nr := 1 + s.rng.IntN(4)
			size := 16 + s.rng.IntN(300)
			b := &batchRec{prod: pi, idx: idx, stream: pr.stream, gen: n.Gen}
			var rr []format.Record
			for k := range nr {
				bd := body(pi, idx, k, size)
				b.bodies = append(b.bodies, bd)
				rr = append(rr, format.Record{Body: []byte(bd), Headers: []format.Header{{Name: []byte("p"), Value: []byte(strconv.Itoa(pi))}}})
			}
			s.batches[fmt.Sprintf("%d.%d", pi, idx)] = b
			recs = append(recs, rr)
			rs = append(rs, b)
		}
		id := s.w.IDs[pr.stream]
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { s.mu.Lock(); pr.busy = false; s.mu.Unlock() }()
			// Submit in order (arrival order), then wait for every ack.
			for j, b := range rs {
				p, err := n.Star.Submit(context.Background(), id, recs[j], appendOptions(pr, b))
				s.mu.Lock()
				if err != nil {
					b.state, b.err = retryFailed(b), err
				} else {
					b.p = p
				}
				s.mu.Unlock()
			}
			for _, b := range rs {
				if b.p == nil {
					continue
				}
				a, err := b.p.Wait(context.Background())
				s.mu.Lock()
				switch {
				case err == nil:
					b.state, b.ack = acked, a
					s.retriedLostAck(b)
				case errors.Is(err, star.ErrNotLeader):
					b.state, b.err = retryFailed(b), err
				default:
					b.state, b.err = unknown, err
				}
				s.mu.Unlock()
			}
		}()
	}
}

// corruptAtRest damages one copy in the bad zone of a slot the absorb has
// taken (below the checkpoint): bit rot, a torn object, or another epoch's
// envelope at the key. Reads, settle and trim must treat it as a missing
// copy and never serve it.
func (s *sim) corruptAtRest() {
	h, err := s.w.Meta.GetHead(s.ctx, Chain)
	if err != nil || h.Checkpoint.Slot == 0 {
		return
	}
	slot := uint64(s.rng.IntN(int(h.Checkpoint.Slot)))
	key := format.SlotKey(StarID, h.Checkpoint.Epoch, slot)
	kind := []string{"flip", "truncate", "epoch"}[s.rng.IntN(3)]
	ok, err := s.w.CorruptAtRest(s.ctx, s.bad, key, kind, s.rng.Uint64())
	if err != nil {
		s.fatalf("corrupt %s: %v", key, err)
	}
	if ok {
		s.mu.Lock()
		s.dur.MarkCorrupted(s.bad, key)
		s.mu.Unlock()
		totals.corrupt.Add(1)
	}
}

// staleEvent redelivers an old release event (or runs a sweep) while the
// live absorb runs: a delayed, duplicated or reordered Lambda event.
func (s *sim) staleEvent() {
	var head metastore.Cursor
	if n := len(s.releasedAt); n > 0 && s.rng.IntN(4) > 0 {
		head = s.releasedAt[s.rng.IntN(n)]
	}
	s.goRun(func(ctx context.Context) { _, _ = s.w.Absorber().Run(ctx, Chain, head) })
}

// workloadRead reads a stream through the faults (and racing settle and
// trim); what it returns must agree with the history checked later.
func (s *sim) workloadRead() {
	n := s.node
	si := s.rng.IntN(len(s.w.Streams))
	st := s.w.Streams[si]
	from := uint64(s.rng.IntN(200))
	r := s.w.Reader(n.Star, false)
	totals.reads.Add(1)
	s.goRun(func(ctx context.Context) {
		res, err := r.Read(ctx, st, read.Start{Kind: read.FromSeq, Seq: from}, read.Limits{Count: 50})
		if err != nil {
			return // unavailable or no good copy right now: never wrong data
		}
		s.mu.Lock()
		for _, rec := range res.Records {
			s.obs = append(s.obs, observation{stream: si, seq: rec.Seq, body: string(rec.Body)})
		}
		s.mu.Unlock()
	})
}

// restart kills the star (or, as a zombie, leaves it running with its
// uploads in flight) and starts a new incarnation that takes over.
func (s *sim) restart(zombie bool) {
	if s.node != nil {
		s.loseAcksOf(s.node)
		if zombie && s.zombie == nil {
			s.zombie, s.zombieUntil = s.node, s.step+1+s.rng.IntN(3)
			totals.zombies.Add(1)
		} else {
			s.node.Kill()
		}
		s.node = nil
	}
	s.gen++
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, err := s.w.StartNode(ctx, s.gen, time.Second)
	if err != nil {
		s.t.Logf("seed=%d step=%d: star incarnation %d did not start (retried next step): %v", s.seed, s.step, s.gen, err)
		return
	}
	if s.gen > 1 {
		totals.takeovers.Add(1)
	}
	s.node = n
	s.started = true
	s.epoch0 = n.Star.Released(Chain).Epoch
}

// ---- checks ----

func (s *sim) check() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkMeta()
	for _, n := range []*Node{s.node, s.zombie} {
		if n != nil {
			s.checkRelease(n)
			s.checkDurable(n)
			s.checkBacklog(n)
		}
	}
	s.checkNoMetastoreOnAckPath()
	s.checkDetermined()
	s.checkRefsApart()
	s.checkProbeDeletes()
	s.checkStallCauses()
	s.checkDedupeBound()
	s.checkLostAcks()
	s.checkCarried()
	if s.node != nil {
		s.releasedAt = append(s.releasedAt, s.node.Star.Released(Chain))
		s.checkHistory(s.node)
	}
}

// checkDetermined: every object at a determined key of the settled
// bucket got the same bytes from every copy that put it (design 014,
// "One commit point per step"; World.Determined).
func (s *sim) checkDetermined() {
	if v := s.w.Determined.Violations(); len(v) > 0 {
		s.fatalf("determined keys put with other bytes: %v", v)
	}
}

// checkRefsApart: no two refs of a stream hold one seq, though settle
// copies of two configurations (World.Settler: one merges a stream's
// small previous ref into its flush, the other never does) flush the
// same steps, racing and after kills (metastore.SettleApart; design 014,
// "Level 1 as built").
func (s *sim) checkRefsApart() {
	for _, st := range s.w.Streams {
		var last metastore.Ref
		for from := uint64(0); ; {
			page, err := s.w.Meta.QueryRefs(s.ctx, st.ID, from, 100)
			if err != nil {
				s.fatalf("stream %s: query refs from %d: %v", st.Name, from, err)
			}
			for _, r := range page {
				if last.StreamID != "" && r.FirstSeq <= last.LastSeq {
					s.fatalf("stream %s: refs %d-%d and %d-%d overlap", st.Name, last.FirstSeq, last.LastSeq, r.FirstSeq, r.LastSeq)
				}
				last = r
			}
			if len(page) == 0 || last.LastSeq == ^uint64(0) {
				break
			}
			from = last.LastSeq + 1
		}
	}
}

// checkProbeDeletes: the probe deleted nothing but orphaned settled
// objects and its markers (ProbeDeletes; that no deleted object was still
// needed is checkHistory's read-back of every acknowledged record).
func (s *sim) checkProbeDeletes() {
	if v := s.w.ProbeDeletes.Violations(); len(v) > 0 {
		s.fatalf("the garbage probe deleted what is not an orphan settled object: %v", v)
	}
}

// checkMeta: cursors never move back and stay ordered; indexed is set
// once; an epoch, once
// fenced, keeps its cut forever; every fenced epoch's cut slot is dead and
// no slot below it is (invariant 5).
func (s *sim) checkMeta() {
	h, err := s.w.Meta.GetHead(s.ctx, Chain)
	if err != nil {
		s.fatalf("read head: %v", err)
	}
	old := s.lastHead
	if h.Epoch < old.Epoch || h.Checkpoint.Less(old.Checkpoint) || h.Settled.Less(old.Settled) || h.Trimmed.Less(old.Trimmed) || h.Flushed.Less(old.Flushed) || h.Merged.Less(old.Merged) {
		s.fatalf("head moved backward: %+v -> %+v", old, h)
	}
	if h.Checkpoint.Less(h.Settled) || h.Settled.Less(h.Trimmed) || h.Settled.Less(h.Flushed) || h.Settled.Less(h.Merged) {
		s.fatalf("cursors out of order: %+v", h)
	}
	// indexed is set once, at a checkpoint (design 014, "Switching a live
	// chain"): never moved or cleared once set, never past the checkpoint.
	if (!old.Indexed.IsZero() && h.Indexed != old.Indexed) || h.Checkpoint.Less(h.Indexed) {
		s.fatalf("indexed cursor moved after it was set, or past the checkpoint: %+v -> %+v", old, h)
	}
	s.lastHead = h
	set := s.w.RawSet()
	k, w := s.w.Opt.K, s.w.Opt.W
	for e := uint64(1); e <= h.Epoch; e++ {
		rec, err := s.w.Meta.GetEpoch(s.ctx, Chain, e)
		if errors.Is(err, metastore.ErrNotFound) {
			continue
		}
		if err != nil {
			s.fatalf("epoch %d: %v", e, err)
		}
		cut, was := s.fenced[e]
		if was && (rec.State != metastore.EpochFenced || rec.Cut != cut) {
			s.fatalf("epoch %d was fenced at %d and is now %+v: a halted epoch resumed", e, cut, rec)
		}
		if rec.State != metastore.EpochFenced {
			if e < h.Epoch {
				s.fatalf("epoch %d is superseded by %d but not fenced", e, h.Epoch)
			}
			continue
		}
		if was {
			continue
		}
		s.fenced[e] = rec.Cut
		states := s.states(set, e, rec.Cut)
		if v := chain.Classify(w, states); v != chain.Dead {
			s.fatalf("epoch %d cut %d is %v %v, want dead (K=%d W=%d)", e, rec.Cut, v, states, k, w)
		}
		from := uint64(0)
		switch {
		case e < h.Trimmed.Epoch:
			from = rec.Cut
		case e == h.Trimmed.Epoch:
			from = min(h.Trimmed.Slot, rec.Cut)
		}
		for slot := from; slot < rec.Cut; slot++ {
			if v := chain.Classify(w, s.states(set, e, slot)); v == chain.Dead {
				s.fatalf("epoch %d slot %d below the cut %d is dead", e, slot, rec.Cut)
			}
		}
	}
}

func (s *sim) states(set chain.Set, epoch, slot uint64) []chain.State {
	key := format.SlotKey(StarID, epoch, slot)
	var out []chain.State
	for i := range set.Buckets {
		c, err := set.ReadEnvelope(s.ctx, i, key)
		if err != nil {
			s.fatalf("read envelope %s in bucket %d: %v", key, i, err)
		}
		out = append(out, c.State)
	}
	return out
}

// flightBatches parses a slot's flight from any copy and returns the
// batches (producer.idx) whose records it holds.
func (s *sim) flightBatches(epoch, slot uint64) ([]string, bool) {
	key := format.SlotKey(StarID, epoch, slot)
	for _, m := range s.w.Mems {
		b, err := m.Get(s.ctx, key, 0, -1)
		if err != nil {
			continue
		}
		f, err := format.ParseFlight(b)
		if err != nil || f.Envelope.Epoch != epoch || f.Envelope.Slot != slot {
			continue
		}
		seen := map[string]bool{}
		var out []string
		for _, en := range f.Entries {
			_, recs, err := format.DecodeSegment(b[en.Offset : en.Offset+en.Length])
			if err != nil {
				s.fatalf("slot %s: a flight that parses has a bad segment: %v", key, err)
			}
			for _, r := range recs {
				p, i, _, ok := parseBody(string(r.Body))
				if !ok {
					s.fatalf("slot %s holds a record nobody appended: %q", key, r.Body)
				}
				id := fmt.Sprintf("%d.%d", p, i)
				if !seen[id] {
					seen[id] = true
					out = append(out, id)
				}
			}
		}
		return out, true
	}
	return nil, false
}

// checkRelease: acks release in slot order (invariant 4): every batch in a
// slot below the star's released head is acked (or was told its outcome
// is unknown: releaseVerdict), none at or above it is;
// and a star never releases past the cut of its fenced epoch (a halted
// epoch never resumes, invariant 5).
func (s *sim) checkRelease(n *Node) {
	rel := n.Star.Released(Chain)
	rec, err := s.w.Meta.GetEpoch(s.ctx, Chain, rel.Epoch)
	if err != nil {
		s.fatalf("star gen %d released %v in an epoch without a record: %v", n.Gen, rel, err)
	}
	if rec.State == metastore.EpochFenced && rel.Slot > rec.Cut {
		s.fatalf("star gen %d released up to slot %d of epoch %d, fenced at %d", n.Gen, rel.Slot, rel.Epoch, rec.Cut)
	}
	vk := fmt.Sprintf("%d/%d", n.Gen, rel.Epoch)
	h := s.lastHead
	from := s.verified[vk]
	if h.Trimmed.Epoch == rel.Epoch {
		from = max(from, h.Trimmed.Slot)
	}
	if h.Trimmed.Epoch > rel.Epoch {
		from = rel.Slot
	}
	for slot := from; slot < rel.Slot+uint64(s.w.Opt.Window)+1; slot++ {
		ids, ok := s.flightBatches(rel.Epoch, slot)
		if !ok {
			continue
		}
		for _, id := range ids {
			b := s.batches[id]
			if b == nil {
				s.fatalf("slot %d/%d holds batch %s nobody submitted", rel.Epoch, slot, id)
			}
			if b.gen != n.Gen {
				continue // an earlier incarnation's flight, republished by nobody: not this star's release
			}
			if b.p == nil {
				s.fatalf("slot %d/%d holds batch %s, which was refused at admission (%v)", rel.Epoch, slot, id, b.err)
			}
			done := false
			select {
			case <-b.p.Done():
				done = true
			default:
			}
			var err error
			if done {
				_, err = b.p.Result()
			}
			if verr := releaseVerdict(slot, rel.Slot, done, err); verr != nil {
				s.fatalf("batch %s in slot %d/%d, released head %v: %v", id, rel.Epoch, slot, rel, verr)
			}
		}
	}
	s.verified[vk] = max(s.verified[vk], rel.Slot)
}

// releaseVerdict judges one batch of a slot against its star's released
// slot (invariant 4): a batch below it is acked, one at or above it is not.
// A batch whose outcome was reported unknown (star.ErrOutcomeUnknown: an
// epoch halted with its flight in the air) may be in a released slot:
// recovery may commit that flight in the next epoch, which the unknown
// outcome allows.
func releaseVerdict(slot, released uint64, done bool, err error) error {
	switch {
	case slot < released && done && errors.Is(err, star.ErrOutcomeUnknown):
		return nil
	case slot < released && (!done || err != nil):
		return fmt.Errorf("below the released head, not acked (done %v, err %v)", done, err)
	case slot >= released && done && err == nil:
		return errors.New("at or above the released head, acked")
	}
	return nil
}

// checkDurable: every slot from the settled cursor up to the star's
// released head holds W valid flight copies in the raw buckets (invariant
// 1, read from the stores, not from the star's confirmations).
func (s *sim) checkDurable(n *Node) {
	if err := s.dur.Durable(s.ctx, n.Star.Released(Chain), s.lastHead.Settled); err != nil {
		s.fatalf("star gen %d: %v", n.Gen, err)
	}
}

// checkBacklog: the released-unabsorbed flights never exceed the budget
// (invariant 7).
func (s *sim) checkBacklog(n *Node) {
	exp := promtest.Render(n.Star.Metrics())
	v := s.metric(exp, `strand_backlog_flights{class="express"}`)
	if int(v) > s.w.Opt.BacklogFlights {
		s.fatalf("backlog %v flights over the budget %d", v, s.w.Opt.BacklogFlights)
	}
	if h := s.metric(exp, haltsSeries); n == s.node {
		s.noteHalts(uint64(h))
	}
}

const haltsSeries = `strand_epoch_halts_total{class="express"}`

// metric reads one series from an exposition; a missing series fails the
// run (a renamed metric must not read as 0).
func (s *sim) metric(exposition, series string) float64 {
	s.t.Helper()
	v, err := promtest.Lookup(exposition, series)
	if err != nil {
		s.fatalf("%v", err)
	}
	return v
}

func (s *sim) noteHalts(h uint64) {
	if h > s.halts {
		totals.halts.Add(int64(h - s.halts))
	}
	s.halts = h
}

// checkStallCauses: every backlog stall names one of the known causes
// (invariant 7).
func (s *sim) checkStallCauses() {
	for cause := range s.w.Logs.Stalls() {
		switch cause {
		case star.StallAbsorbLagging, star.StallMetastoreSlow, star.StallEpochSettling:
		default:
			s.fatalf("a backlog stall was logged with cause %q", cause)
		}
	}
}

// checkNoMetastoreOnAckPath: the star calls the metastore only to lead
// (start, takeover) and to recover a halted epoch, never between admission
// and ack (invariant 6). A step in which the star was neither starting nor
// recovering (its halts all recovered, no new halt) must show no star
// metastore call, however many batches it acked.
func (s *sim) checkNoMetastoreOnAckPath() {
	calls := s.w.StarMeta.Calls()
	prevCalls, prevBusy := s.starCalls, s.busy
	s.starCalls = calls
	if s.node == nil {
		s.busy = true
		return
	}
	halts := uint64(s.metric(promtest.Render(s.node.Star.Metrics()), haltsSeries))
	recovered := s.node.Star.Released(Chain).Epoch - s.epoch0
	prevHalts := s.myHalts
	s.myHalts = halts
	// busy: starting, or a halt not yet recovered (fence, mint in progress).
	s.busy = s.started || s.zombie != nil || halts > recovered
	s.started = false
	if !prevBusy && !s.busy && halts == prevHalts && calls != prevCalls {
		s.fatalf("the star made %d metastore calls in a step with no start, halt or recovery", calls-prevCalls)
	}
}

// checkHistory reads every stream as a successor would (refs, and the
// flights from the checkpoint to the released head read from valid copies
// in the raw buckets: never the star's memory; unfaulted stores, so a
// check never fails for availability) and
// checks invariants 1 to 3: every acked record is at its acked seq,
// unchanged; seqs are contiguous from 0 and no record is there twice; a
// producer's records are in its arrival order; only appended records are
// there; and every earlier workload read agrees with this history.
func (s *sim) checkHistory(n *Node) {
	succ, err := s.dur.Successor(s.ctx, s.lastHead, n.Star.Released(Chain))
	if err != nil {
		s.fatalf("rebuild what a successor reads: %v", err)
	}
	r := s.w.Reader(succ, true)
	hist := make([][]string, len(s.w.Streams))
	all := make([][]star.SeqRecord, len(s.w.Streams))
	tails := make([]uint64, len(s.w.Streams))
	for si, st := range s.w.Streams {
		recs, tail, err := ReadAll(s.ctx, r, st)
		if err != nil {
			s.fatalf("read %s back: %v", st.Name, err)
		}
		all[si], tails[si] = recs, tail
	}
	s.countRecords(all)
	copies := map[string][]uint64{} // forgotten producers' batches: the seqs of each record's copies
	for si, st := range s.w.Streams {
		recs, tail := all[si], tails[si]
		if uint64(len(recs)) != tail {
			s.fatalf("stream %s: read %d records, tail %d", st.Name, len(recs), tail)
		}
		seen := map[string]bool{}
		lastIdx := map[int]int{}
		for i, rec := range recs {
			if rec.Seq != uint64(i) {
				s.fatalf("stream %s: record %d has seq %d (not contiguous)", st.Name, i, rec.Seq)
			}
			b := string(rec.Body)
			p, idx, k, ok := parseBody(b)
			if !ok {
				s.fatalf("stream %s seq %d: %q is not a record anyone appended (changed or invented)", st.Name, i, b)
			}
			bt := s.batches[fmt.Sprintf("%d.%d", p, idx)]
			if bt == nil || bt.stream != si {
				s.fatalf("stream %s seq %d: %q belongs to no batch of this stream", st.Name, i, b)
			}
			again := s.forgotten(bt)
			if seen[b] && !again {
				s.fatalf("stream %s seq %d: %q is there twice", st.Name, i, b)
			}
			if again {
				copies[b] = append(copies[b], rec.Seq)
				if seen[b] {
					hist[si] = append(hist[si], b)
					continue // a copy: its ack and order are the first's (or checked below)
				}
			}
			seen[b] = true
			switch bt.state {
			case failed:
				s.fatalf("stream %s seq %d: %q is from a batch that failed definitely (%v)", st.Name, i, b, bt.err)
			case pending:
				if bt.gen == n.Gen {
					s.fatalf("stream %s seq %d: %q is readable but its batch is not acked yet", st.Name, i, b)
				}
			case acked:
				if want := bt.ack.FirstSeq + uint64(k); rec.Seq != want && !again {
					s.fatalf("stream %s: %q at seq %d, acked at %d", st.Name, b, rec.Seq, want)
				}
			}
			if li, ok := lastIdx[p]; ok && idx < li {
				s.fatalf("stream %s seq %d: producer %d's batch %d after its batch %d (arrival order broken)", st.Name, i, p, idx, li)
			}
			lastIdx[p] = idx
			hist[si] = append(hist[si], b)
		}
	}
	s.checkCopies(copies)
	for key, b := range s.batches {
		if b.state != acked {
			continue
		}
		h := hist[b.stream]
		if b.ack.LastSeq >= uint64(len(h)) {
			s.fatalf("batch %s acked at %d..%d but stream %s holds %d records: an acked record is lost", key, b.ack.FirstSeq, b.ack.LastSeq, s.w.Streams[b.stream].Name, len(h))
		}
		for k, bd := range b.bodies {
			if h[b.ack.FirstSeq+uint64(k)] != bd {
				s.fatalf("batch %s record %d: acked at seq %d, read %q", key, k, b.ack.FirstSeq+uint64(k), h[b.ack.FirstSeq+uint64(k)])
			}
		}
	}
	kept := s.obs[:0]
	for _, o := range s.obs {
		h := hist[o.stream]
		if o.seq >= uint64(len(h)) {
			kept = append(kept, o)
			continue
		}
		if h[o.seq] != o.body {
			s.fatalf("a read served %q at %s seq %d; the history holds %q", o.body, s.w.Streams[o.stream].Name, o.seq, h[o.seq])
		}
	}
	s.obs = kept
}

// countRecords tallies the records read back (by seq, per stream) against
// the book of acked batches: the run's figures, computed before any check
// can stop the run, so a failed seed is counted too.
func (s *sim) countRecords(all [][]star.SeqRecord) {
	book := make([]map[uint64]string, len(all))
	for i := range book {
		book[i] = map[uint64]string{}
	}
	for _, b := range s.batches {
		if b.state != acked {
			continue
		}
		for k, bd := range b.bodies {
			book[b.stream][b.ack.FirstSeq+uint64(k)] = bd
		}
	}
	var t Tally
	for si, recs := range all {
		t.Add(CountRecords(book[si], recs))
	}
	s.tally = t
}

// drain ends the run: faults clear, the zombie dies, every producer gets
// its answer, the absorb catches up, settle and trim run, and the final
// state passes every check.
func (s *sim) drain() {
	s.action = "drain"
	s.w.ClearFaults()
	s.until = map[string]int{}
	if s.zombie != nil {
		s.zombie.Kill()
		s.zombie = nil
	}
	for tries := 0; s.node == nil; tries++ {
		if tries > 5 {
			s.fatalf("no star incarnation starts with every fault cleared")
		}
		s.restart(false)
	}
	for range 600 {
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		s.mu.Lock()
		busy := false
		for _, p := range s.prods {
			busy = busy || p.busy
		}
		s.mu.Unlock()
		if !busy {
			break
		}
	}
	s.mu.Lock()
	for _, p := range s.prods {
		if p.busy {
			s.mu.Unlock()
			s.fatalf("a producer is still waiting for its acks 60 s after every fault cleared")
		}
	}
	s.mu.Unlock()
	s.drainIdempotent()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.w.Absorber().AbsorbTo(ctx, Chain, s.node.Star.Released(Chain)); err != nil {
		s.fatalf("absorb to the released head: %v", err)
	}
	if _, err := s.w.Settler().Run(ctx, Chain); err != nil {
		s.fatalf("settle: %v", err)
	}
	if _, err := s.w.Trimmer().Run(ctx, Chain); err != nil {
		s.fatalf("trim: %v", err)
	}
	if _, err := s.w.Prober().Sweep(ctx); err != nil {
		s.fatalf("probe sweep: %v", err)
	}
	if !s.w.Opt.PassIndex && s.w.starOn.Load() {
		// A switched chain: indexed since a pass of the switched star,
		// settled to the checkpoint (never stopped at a refs pass; a run
		// is at most MaxStepsPerRun steps, an epoch step each).
		// The absorb switches once a settle with the switch on has settled
		// a step: absorb again after settle.
		h, err := s.w.Meta.GetHead(ctx, Chain)
		for i := 0; err == nil && (h.Settled != h.Checkpoint || h.Indexed.IsZero()) && i < 20; i++ {
			if _, err = s.w.Settler().Run(ctx, Chain); err != nil {
				s.fatalf("settle: %v", err)
			}
			if err = s.w.Absorber().AbsorbTo(ctx, Chain, s.node.Star.Released(Chain)); err != nil {
				s.fatalf("absorb to the released head: %v", err)
			}
			h, err = s.w.Meta.GetHead(ctx, Chain)
		}
		if err != nil || h.Indexed.IsZero() || h.Settled != h.Checkpoint || h.Flushed.Less(h.Indexed) {
			s.fatalf("switched chain after the drain: head %+v, %v: want indexed, settled to the checkpoint", h, err)
		}
	}
	if s.w.SettleIndexed() {
		// Once faults stop, a quiet chain flushes (ADR 0057): FlushAge of
		// settle's clock after the last append, settle flushes every
		// stream of the live runs and the flushed cursor reaches the
		// settled one.
		time.Sleep(s.w.Opt.FlushAge + time.Second)
		for i := 0; ; i++ {
			h, err := s.w.Meta.GetHead(ctx, Chain)
			if err != nil {
				s.fatalf("head after the drain: %v", err)
			}
			if h.Flushed == h.Settled && h.Settled == h.Checkpoint {
				break
			}
			if i == 20 {
				s.fatalf("a quiet chain not flushed FlushAge after the drain: head %+v", h)
			}
			if _, err := s.w.Settler().Run(ctx, Chain); err != nil {
				s.fatalf("settle a quiet chain: %v", err)
			}
		}
	}
	s.wg.Wait()
	synctest.Wait()
	s.check()
	s.checkIdempotent()
	s.node.Kill()
	s.wg.Wait()
}
