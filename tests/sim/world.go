// Package sim is strand's deterministic simulation harness: the star, the
// absorb (in-process, woken by releases), settle, trim and the garbage probe
// running together against memory stores behind fault wrappers, with one
// seed driving the workload, the faults and every random choice. The
// simulation itself is sim_test.go (go test ./tests/sim -run TestSim
// -seed=N); the fault matrix (tests/faults) reuses this harness.
//
// Run inside a testing/synctest bubble, time is virtual: the star, the
// chain fencer and the fault injectors all sleep and time out on the
// bubble's clock.
package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
	"github.com/strandlog/strand/shared/probe"
	"github.com/strandlog/strand/shared/read"
	"github.com/strandlog/strand/shared/server"
	"github.com/strandlog/strand/shared/settle"
	"github.com/strandlog/strand/shared/star"
	"github.com/strandlog/strand/shared/trim"
	"github.com/strandlog/strand/shared/wake"
)

// StarID is the simulated star's id.
const StarID = "star-0"

// Chain is the simulated loglet: the star's Express chain.
var Chain = metastore.ChainID{Star: StarID, Class: metastore.Express}

// Options shape a world.
type Options struct {
	K, W           int
	Streams        int
	BacklogFlights int
	Window         int           // --s3-parallel-uploads
	CommitDeadline time.Duration // 0: 2 s
	FlightKiB      int           // 0: 4
	IdleCut        bool          // the star's idle cut (ADR 0039)
	HaltWait       time.Duration // --halt-wait; 0: the star's default (30 s)
	// PassIndex runs the absorb, settle, trim, the probe, reads and tail
	// recovery on the pass index (design 014) instead of per-pass refs.
	PassIndex bool
	// FlushBytes and FlushAge are settle's flush (design 014, level 1) on
	// the pass index; 0: chosen from the seed, short, so that the
	// simulation flushes by bytes and by age (NewWorld).
	FlushBytes int64
	FlushAge   time.Duration
	// Fanout is settle's merge of runs (design 014, level 2) on the pass
	// index; 0: chosen from the seed, small (1 to 4), so that the
	// simulation merges.
	Fanout int
	// DedupeMaxProducers is the star's --dedupe-max-producers (0: its
	// default): TestSimDedupeBound sets it below the idempotent producers.
	DedupeMaxProducers int
	// SettleClock is settle's clock for quiet chains (settle.Settler.Clock,
	// ADR 0057); nil: the bubble's virtual clock. A workload whose record
	// timestamps do not follow that clock gives one that does.
	SettleClock clock.Clock
}

// DefaultOptions: Express K=3/W=2, four streams, a small backlog budget so
// stalls happen.
func DefaultOptions() Options {
	return Options{K: 3, W: 2, Streams: 4, BacklogFlights: 8, Window: 4, CommitDeadline: 2 * time.Second, FlightKiB: 4}
}

// World is the simulated deployment: K chain buckets and a settled bucket
// (memory, each behind its own seeded fault injector), one memory metastore
// seen through two fault wrappers (the star's, and settlement's).
type World struct {
	Seed int64
	Opt  Options

	Meta       *metastore.Mem
	StarMeta   *MetaFaults // what the star sees
	SettleMeta *MetaFaults // what absorb, settle, trim and probe see

	Mems    []*objstore.Mem // the raw chain buckets (checks read these)
	Inj     []*objstore.Injector
	Buckets []objstore.Bucket // faulted

	SettledMem *objstore.Mem
	SettledInj *objstore.Injector
	Settled    objstore.Bucket
	// Determined is Settled's recorder of the puts at determined keys
	// (checkDetermined).
	Determined *Determined
	// ProbeDeletes is Settled as the probe sees it (checkProbeDeletes).
	ProbeDeletes *ProbeDeletes

	Streams []metastore.Stream
	IDs     []format.StreamID
	// OnRecover, if set, sees what StartNode opens stream i at: the tail
	// star.RecoverStream read (refs, and the window with PassIndex) and
	// the stream's floor. A checker reports it when a tail goes wrong.
	OnRecover func(i int, recovered star.StreamInfo, floor uint64)
	// WrapAbsorbIndex, if set, wraps the settled bucket as absorb copies
	// made from now on write their pass indexes to it (a kill at those
	// writes: TestSimEdges).
	WrapAbsorbIndex func(objstore.Bucket) objstore.Bucket

	Log  *slog.Logger
	Logs *LogCapture
	rand *lockedRand

	// A world that starts in refs mode (Opt.PassIndex false) switches to
	// the pass index (design 014, "Switching a live chain") as a rolling
	// deploy does: settlement first (settle, trim, the probe and readers,
	// SwitchSettlement), the star's absorb later (SwitchStar, then a new
	// star incarnation).
	settleOn, starOn atomic.Bool

	keptMu sync.Mutex
	kept   *settle.Settler // KeptSettler's
	// copies counts the settle copies made (Settler): every other one has
	// the other deploy's settle configuration.
	copies atomic.Int64

	// windows: every window made (Window) in a TinyWindow seed, for
	// their ranged lookups.
	windowsMu sync.Mutex
	windows   []*passindex.Window
}

// SwitchSettlement switches settle, trim, the probe and readers to the
// pass index; the star's absorb stays in refs mode.
func (w *World) SwitchSettlement() { w.settleOn.Store(true) }

// SwitchStar switches the absorb of the next star incarnations (and of
// absorb copies made from now on) to the pass index, and settlement with
// it.
func (w *World) SwitchStar() { w.starOn.Store(true); w.settleOn.Store(true) }

// AbsorbIndexed reports whether absorb copies made now index their passes.
func (w *World) AbsorbIndexed() bool { return w.Opt.PassIndex || w.starOn.Load() }

// SettleIndexed reports whether settle, trim, the probe and readers made
// now run on the pass index.
func (w *World) SettleIndexed() bool { return w.Opt.PassIndex || w.settleOn.Load() }

// NewWorld builds a world from seed and creates its streams.
func NewWorld(seed int64, opt Options) (*World, error) {
	w := &World{Seed: seed, Opt: opt, Meta: metastore.NewMem(), Logs: &LogCapture{}}
	w.StarMeta = NewMetaFaults(w.Meta, seed*7+1)
	w.SettleMeta = NewMetaFaults(w.Meta, seed*7+2)
	// Pages of refs end short as DynamoDB's do at 1 MB (the simulation's
	// refs are far smaller), so every caller that lists refs must page on.
	w.StarMeta.SetShortPages(0.3)
	w.SettleMeta.SetShortPages(0.3)
	for i := range opt.K {
		m := objstore.NewMem(fmt.Sprintf("zone%d", i))
		in := objstore.NewInjector(seed*31 + int64(i))
		w.Mems = append(w.Mems, m)
		w.Inj = append(w.Inj, in)
		w.Buckets = append(w.Buckets, objstore.WithFaults(m, in))
	}
	if w.Opt.FlushBytes == 0 {
		w.Opt.FlushBytes = []int64{256, 1024, 4096}[uint64(seed)%3]
	}
	if w.Opt.FlushAge == 0 {
		w.Opt.FlushAge = []time.Duration{20 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond}[(uint64(seed)/3)%3]
	}
	if w.Opt.Fanout == 0 {
		w.Opt.Fanout = []int{1, 2, 4}[(uint64(seed)/9)%3]
	}
	w.SettledMem = objstore.NewMem("settled")
	w.SettledInj = objstore.NewInjector(seed*31 + 99)
	w.Determined = &Determined{Bucket: objstore.WithFaults(w.SettledMem, w.SettledInj)}
	w.Settled = w.Determined
	w.ProbeDeletes = &ProbeDeletes{Bucket: w.Settled, Indexed: w.SettleIndexed}
	w.Log = slog.New(w.Logs)
	var s [32]byte
	copy(s[:], strconv.FormatInt(seed, 10))
	w.rand = &lockedRand{r: rand.NewChaCha8(s)}
	for i := range opt.Streams {
		var id format.StreamID
		if _, err := io.ReadFull(w.rand, id[:]); err != nil {
			return nil, err
		}
		st := metastore.Stream{Name: fmt.Sprintf("s%d", i), ID: id.String(), Class: metastore.Express, Star: StarID, State: metastore.StreamActive}
		if _, err := w.Meta.CreateStream(context.Background(), st); err != nil {
			return nil, err
		}
		w.Streams = append(w.Streams, st)
		w.IDs = append(w.IDs, id)
	}
	return w, nil
}

// WrapBuckets wraps each faulted chain bucket (before any node starts),
// for faults the injector does not model.
func (w *World) WrapBuckets(fn func(i int, b objstore.Bucket) objstore.Bucket) {
	for i, b := range w.Buckets {
		w.Buckets[i] = fn(i, b)
	}
}

// Set is the faulted chain bucket set (what the protocols use).
func (w *World) Set() chain.Set {
	return chain.Set{Star: StarID, Buckets: w.Buckets, W: w.Opt.W, Backoff: 5 * time.Millisecond, RetryFor: 30 * time.Second}
}

// RawSet is the chain bucket set without faults (what the checks read).
func (w *World) RawSet() chain.Set {
	var bs []objstore.Bucket
	for _, m := range w.Mems {
		bs = append(bs, m)
	}
	return chain.Set{Star: StarID, Buckets: bs, W: w.Opt.W, Backoff: 5 * time.Millisecond, RetryFor: time.Second}
}

// Sets is the absorb.Sets of the faulted set.
func (w *World) Sets() absorb.Sets { return absorb.Sets{Express: w.Set()} }

// Absorber, Settler, Trimmer and Prober: settlement over the faulted stores.
func (w *World) Absorber() *absorb.Absorber {
	a := &absorb.Absorber{Meta: w.SettleMeta, Sets: w.Sets(), Log: w.Log}
	if w.AbsorbIndexed() {
		a.Index = w.Settled
		if w.WrapAbsorbIndex != nil {
			a.Index = w.WrapAbsorbIndex(a.Index)
		}
	}
	return a
}

// Settler is a new settle copy (a Lambda invocation's). Copies alternate
// between two settle configurations, as copies of two
// builds do during a deploy that changes settle's defaults (design 014,
// "One commit point per step"): the second flushes at twice FlushBytes,
// packs in slot order, and writes packs and objects of at most 4 KiB. A
// copy that dies between its packs and its run index (a PUT fault) is
// followed by copies of the other configuration, whose plans must never
// collide with its packs; and copies of both race.
func (w *World) Settler() *settle.Settler { return w.settler(w.copies.Add(1)%2 == 0) }

// OtherSettler is a new settle copy of the other deploy's configuration
// (Settler; KeptSettler has the first).
func (w *World) OtherSettler() *settle.Settler { return w.settler(true) }

// settler is a settle copy of the first configuration, or of the other
// deploy's (other).
func (w *World) settler(other bool) *settle.Settler {
	s := &settle.Settler{Meta: w.SettleMeta, Sets: w.Sets(), Settled: w.Settled, Log: w.Log, MergeBelowBytes: 2048, PassIndex: w.SettleIndexed(),
		FlushBytes: w.Opt.FlushBytes, FlushAge: w.Opt.FlushAge, Fanout: w.Opt.Fanout,
		Clock: clock.OrReal(w.Opt.SettleClock)} // quiet chains flush (ADR 0057)
	// Copies bound their CPU work differently (0: unbounded, 1, 2; ADR
	// 0077): racing copies must still write the same objects, and a bound
	// must not wedge a step under the world's faults and kills.
	s.CPUWorkers = int(w.copies.Load() % 3)
	if other {
		s.FlushBytes, s.PackBufferBytes, s.MaxObjectBytes = 2*w.Opt.FlushBytes, -1, 4096
		s.MergeBelowBytes = -1 // its flushes never merge the previous ref: refs start elsewhere (checkRefsApart)
	}
	if w.TinyWindow() {
		s.Window = w.Window(w.SettleMeta, w.Settled)
	}
	return s
}

// HoldingSettler is a settle copy of a production flush rule (FlushAge an
// hour, FlushBytes out of reach): its steps merge runs and flush nothing,
// so what they settle stays in runs and merged runs, as it does for up to
// FlushAge in a deployment (mergeTakeover).
func (w *World) HoldingSettler() *settle.Settler {
	s := w.settler(false)
	s.FlushBytes, s.FlushAge = 1<<40, time.Hour
	return s
}

// KeptSettler is the world's long-lived settler (a warm Lambda's or the
// node's): it keeps its window cache and its unflushed state across runs
// (issue 17); a new one after the settlement switch. It has the first
// configuration (Settler).
func (w *World) KeptSettler() *settle.Settler {
	w.keptMu.Lock()
	defer w.keptMu.Unlock()
	if w.kept == nil || w.kept.PassIndex != w.SettleIndexed() {
		w.kept = w.settler(false)
	}
	return w.kept
}
func (w *World) Trimmer() *trim.Trimmer {
	t := &trim.Trimmer{Meta: w.SettleMeta, Sets: w.Sets(), Settled: w.Settled, Log: w.Log, PassIndex: w.SettleIndexed()}
	if w.TinyWindow() {
		t.Window = w.Window(w.SettleMeta, w.Settled)
	}
	return t
}

// Window is the pass index window over meta and the settled bucket (nil
// without PassIndex).
func (w *World) Window(meta metastore.Store, settled objstore.Bucket) *passindex.Window {
	if !w.SettleIndexed() {
		return nil
	}
	// From the seed, without drawing from its stream: half the seeds load
	// the window by LIST and parallel GETs (the node's cold load, and the
	// warm reload after a burst of passes), and half of those under a
	// cache budget of a few objects (evictions and refetches under faults).
	win := &passindex.Window{Meta: meta, Bucket: settled}
	if (uint64(w.Seed)/27)%2 == 1 {
		win.Parallel = 4
		if (uint64(w.Seed)/54)%2 == 1 {
			win.MaxBytes = 16 << 10
		}
	}
	if w.TinyWindow() {
		win.MaxBytes = 1
		w.windowsMu.Lock()
		w.windows = append(w.windows, win)
		w.windowsMu.Unlock()
	}
	return win
}

// TinyWindow reports whether the seed's windows (settle's, trim's, the
// probe's, readers' and tail recovery's) have a cache budget of 1 byte:
// every per-stream lookup of an object not cached runs past the budget,
// by range (design 014, "Lookups past the window budget"), under the
// same checkers as a whole fetch. A fifth of the seeds, from the seed
// without drawing from its stream.
func (w *World) TinyWindow() bool { return uint64(w.Seed)%5 == 1 }

// WindowRanged is the number of per-stream lookups the world's windows
// read by range (passindex.WindowStats.Ranged), summed.
func (w *World) WindowRanged() int64 {
	w.windowsMu.Lock()
	defer w.windowsMu.Unlock()
	var n int64
	for _, win := range w.windows {
		n += win.Stats().Ranged
	}
	return n
}

// RefReader is what a successor recovers stream i's tail and producers
// from (star.RecoverStream), unfaulted: its refs, and with PassIndex its
// parts in the window first.
func (w *World) RefReader(i int) star.RefReader {
	if win := w.Window(w.Meta, w.SettledMem); win != nil {
		return win.ForStream(w.Streams[i])
	}
	return w.Meta
}
func (w *World) Prober() *probe.Handler {
	// The shortest grace: an orphan found deletable by one sweep is deleted
	// by the next, racing settle and trim, so the simulation checks that
	// the deletable rule alone never removes an object a ref needs.
	p := &probe.Handler{Sets: map[metastore.ChainID]chain.Set{Chain: w.Set()}, Meta: w.SettleMeta, Settled: w.ProbeDeletes, Log: w.Log,
		OrphanGrace: time.Nanosecond, PassIndex: w.SettleIndexed()}
	if w.TinyWindow() {
		p.Window = w.Window(w.SettleMeta, w.Settled)
	}
	return p
}

// ClearFaults removes every injected fault from every store.
func (w *World) ClearFaults() {
	for _, in := range w.Inj {
		in.Clear()
	}
	w.SettledInj.Clear()
	w.StarMeta.Clear()
	w.SettleMeta.Clear()
}

// Faults is the number of faults injected so far in every store.
func (w *World) Faults() int64 {
	n := w.SettledInj.Faults() + w.StarMeta.Faults() + w.SettleMeta.Faults()
	for _, in := range w.Inj {
		n += in.Faults()
	}
	return n
}

// Node is one incarnation of the star process: the star, its in-process
// absorb (wake.Local) and the probe it runs after each fence.
type Node struct {
	Star   *star.Star
	Local  *wake.Local
	Gen    int
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// StarConfig is the simulated star's configuration.
func (w *World) StarConfig() star.Config { return w.StarConfigFor(StarID) }

// StarConfigFor is StarConfig for star id (a second star shares the
// buckets, as the stars of a deployment do: TestSimMoves).
func (w *World) StarConfigFor(id string) star.Config {
	cfg := star.Defaults()
	cfg.StarID = id
	cfg.Standard = star.ClassConfig{}
	cfg.Express = star.ClassConfig{Buckets: w.Buckets, W: w.Opt.W, MemoryBufferMiB: 1, ParallelUploads: w.Opt.Window,
		FlushDeadline: 2 * time.Millisecond, IdleCut: w.Opt.IdleCut, FlightKiB: max(w.Opt.FlightKiB, 1), CommitDeadline: w.Opt.CommitDeadline}
	if cfg.Express.CommitDeadline <= 0 {
		cfg.Express.CommitDeadline = 2 * time.Second
	}
	cfg.BacklogFlights = w.Opt.BacklogFlights
	cfg.HaltWait = w.Opt.HaltWait
	cfg.StarMaxProducers = w.Opt.DedupeMaxProducers
	cfg.ReleaseEventInterval = 5 * time.Millisecond
	cfg.Rand = w.rand
	cfg.Logger = w.Log
	return cfg
}

// StartNode starts a star incarnation (minting epoch 1, or taking over:
// fence, absorb to the cut, mint) with its in-process absorb, and opens
// every stream with its tail recovered from refs. sweep is the absorb's
// sweep interval (0: none).
func (w *World) StartNode(ctx context.Context, gen int, sweep time.Duration) (*Node, error) {
	return w.startNode(ctx, gen, sweep, StarID, true)
}

// StartNodeAs starts an incarnation of star id as StartNode does, but
// opens no stream: its server opens the streams it leads on their first
// call (TestSimMoves).
func (w *World) StartNodeAs(ctx context.Context, gen int, sweep time.Duration, id string) (*Node, error) {
	return w.startNode(ctx, gen, sweep, id, false)
}

func (w *World) startNode(ctx context.Context, gen int, sweep time.Duration, id string, open bool) (*Node, error) {
	abs := w.Absorber()
	prober := w.Prober()
	runCtx, cancel := context.WithCancel(context.Background())
	n := &Node{Gen: gen, cancel: cancel}
	opt := star.Options{
		Absorber: abs,
		NewFencer: func(id string, cc star.ClassConfig) star.Fencer {
			return chain.Set{Star: id, Buckets: cc.Buckets, W: cc.W, Backoff: 5 * time.Millisecond, RetryFor: 30 * time.Second}
		},
		OnFenced: func(c metastore.ChainID, epoch, cut uint64, window int) {
			ev := probe.FenceEvent{Star: c.Star, Class: c.Class.String(), Epoch: epoch, Cut: cut, Window: window}
			n.wg.Add(1)
			go func() {
				defer n.wg.Done()
				_, _ = prober.Probe(runCtx, ev) // the sweep retries a failure
			}()
		},
	}
	local := wake.NewLocal(abs, nil, w.Log)
	opt.Waker = local
	st, err := star.New(w.StarConfigFor(id), w.StarMeta, opt)
	if err != nil {
		cancel()
		return nil, err
	}
	local.SetObserver(st)
	st.SetAbsorbHealth(local.Health)
	n.Star, n.Local = st, local
	n.wg.Add(1)
	go func() { defer n.wg.Done(); local.Run(runCtx, sweep) }()
	if err := st.Start(ctx); err != nil {
		n.Kill()
		return nil, err
	}
	for i, id := range w.IDs {
		if !open {
			break
		}
		info, err := star.RecoverStream(ctx, w.RefReader(i), id, metastore.Express, time.Now()) // virtual time under synctest
		if err != nil {
			n.Kill()
			return nil, fmt.Errorf("recover the tail of %s: %w", w.Streams[i].Name, err)
		}
		// As the server: the tail never moves backward (trim's floor).
		meta, err := w.Meta.GetStream(ctx, w.Streams[i].Name)
		if err != nil {
			n.Kill()
			return nil, fmt.Errorf("recover the floor of %s: %w", w.Streams[i].Name, err)
		}
		if w.OnRecover != nil {
			w.OnRecover(i, info, meta.Floor)
		}
		info.Next = max(info.Next, meta.Floor)
		if err := st.Open(info); err != nil {
			n.Kill()
			return nil, err
		}
	}
	ch := metastore.ChainID{Star: id, Class: metastore.Express}
	local.Released(runCtx, ch, st.Released(ch))
	return n, nil
}

// Kill stops the incarnation with no orderly shutdown of its data: what is
// in flight stays wherever it got to, pending batches fail with
// star.ErrClosed (their outcome is unknown: they may have committed).
func (n *Node) Kill() {
	n.once.Do(func() {
		n.cancel()
		n.Star.Close()
		n.wg.Wait()
	})
}

// Server is the API server of the node (Connect, JSON over HTTP for unary
// calls): metadata in the unfaulted metastore, reads through the faults,
// logs into the world's capture. With withAuth, bearer tokens are checked.
func (w *World) Server(n *Node, withAuth bool) (*server.Server, error) {
	return server.New(w.ServerConfig(n, withAuth))
}

// ServerConfig is the configuration of Server.
func (w *World) ServerConfig(n *Node, withAuth bool) server.Config {
	sc := server.Config{Star: n.Star, Meta: w.Meta, Reader: w.Reader(n.Star, false), Logger: w.Log, Rand: w.rand, Heartbeat: 100 * time.Millisecond,
		Window: w.Window(w.Meta, w.SettledMem)}
	if withAuth {
		sc.Auth = &auth.Checker{Meta: w.Meta}
	}
	return sc
}

// Reader is a reader of the node's streams. raw reads the unfaulted
// buckets and metastore (the checks); otherwise it reads through the
// faults (the workload).
func (w *World) Reader(idx read.Index, raw bool) *read.Reader {
	r := &read.Reader{Star: idx, Meta: w.SettleMeta, Sets: map[metastore.Class]chain.Set{metastore.Express: w.Set()}, Settled: w.Settled}
	if raw {
		r = &read.Reader{Star: idx, Meta: w.Meta, Sets: map[metastore.Class]chain.Set{metastore.Express: w.RawSet()}, Settled: w.SettledMem}
	}
	if win := w.Window(r.Meta, r.Settled); win != nil {
		r.Transit = win
	}
	return r
}

// ReadAll reads a stream from seq 0 to its acked tail.
func ReadAll(ctx context.Context, r *read.Reader, st metastore.Stream) ([]star.SeqRecord, uint64, error) {
	var out []star.SeqRecord
	from := uint64(0)
	for {
		res, err := r.Read(ctx, st, read.Start{Kind: read.FromSeq, Seq: from}, read.Limits{})
		if err != nil {
			return out, 0, err
		}
		out = append(out, res.Records...)
		if res.Next >= res.Tail || len(res.Records) == 0 {
			return out, res.Tail, nil
		}
		from = res.Next
	}
}

// CorruptAtRest rewrites the object at key in chain bucket i: kind "flip"
// flips one bit, "truncate" keeps a prefix, "epoch" replaces it with the
// same bytes stamped with another epoch (a wrong epoch at the key). The
// store then holds a bad copy: bit rot, a torn upload, a misplaced object.
// It reports whether an object was there.
func (w *World) CorruptAtRest(ctx context.Context, i int, key, kind string, pick uint64) (bool, error) {
	m := w.Mems[i]
	body, err := m.Get(ctx, key, 0, -1)
	if errors.Is(err, objstore.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	bad := bytes.Clone(body)
	switch kind {
	case "flip":
		bit := pick % uint64(len(bad)*8)
		bad[bit/8] ^= 1 << (bit % 8)
	case "truncate":
		bad = bad[:pick%uint64(len(bad))]
	case "epoch":
		env, perr := format.ParseEnvelope(bad)
		if perr != nil {
			return false, nil
		}
		env.Epoch += 1000
		eb := env.Bytes()
		copy(bad, eb[:])
	default:
		return false, fmt.Errorf("unknown corruption %q", kind)
	}
	if err := m.Delete(ctx, key); err != nil {
		return false, err
	}
	if len(bad) == 0 {
		return true, nil // truncated to nothing: a missing copy
	}
	return true, m.PutIfAbsent(ctx, key, bad)
}

// LogCapture is a slog.Handler that keeps what the checks need: every
// backlog stall and its cause, and every message, to look for secrets.
type LogCapture struct {
	mu     sync.Mutex
	stalls map[string]int
	lines  []string
}

func (l *LogCapture) Enabled(context.Context, slog.Level) bool { return true }
func (l *LogCapture) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	b.WriteString(r.Message)
	cause := ""
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		if a.Key == "cause" {
			cause = a.Value.String()
		}
		return true
	})
	if r.Message == "backlog budget reached: publishes blocked" {
		if l.stalls == nil {
			l.stalls = map[string]int{}
		}
		l.stalls[cause]++
	}
	if len(l.lines) < 100000 {
		l.lines = append(l.lines, b.String())
	}
	return nil
}
func (l *LogCapture) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *LogCapture) WithGroup(string) slog.Handler      { return l }

// Stalls returns the logged stalls by cause.
func (l *LogCapture) Stalls() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, v := range l.stalls {
		out[k] = v
	}
	return out
}

// Lines returns the logged lines.
func (l *LogCapture) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

type lockedRand struct {
	mu sync.Mutex
	r  *rand.ChaCha8
}

func (l *lockedRand) Read(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Read(p)
}
