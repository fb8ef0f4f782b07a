package settle

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
)

// Defaults.
const (
	DefaultMergeBelowBytes = 4 << 20
	// DefaultMaxObjectSpan bounds the record time a settled object spans
	// when settle merges into it (Settler.MaxObjectSpan): retention drops
	// whole objects, so it bounds how long a record outlives its
	// retention, with FlushAge (issue 30).
	DefaultMaxObjectSpan   = time.Hour
	DefaultMaxObjectBytes  = 8 << 20
	DefaultMaxSlotsPerStep = 4096
	DefaultMaxStepsPerRun  = 16
	// swapRetries bounds how often one stream is re-read after a swap lost
	// to another copy.
	swapRetries = 4
)

// MaxObjectsPerRef bounds the settled objects one swapped ref points at,
// so that the ref stays a small item: a settled location is about 200
// bytes of a DynamoDB item, 256 of them about 51 KB. A ref with more than
// that many objects' worth of records (over 2 GiB at the default 8 MiB
// objects: one absorb pass of a stream over hundreds of 8 MiB Standard
// flights) gets larger objects instead: its records spread evenly over the
// objects left.
const MaxObjectsPerRef = 256

// Errors.
var (
	// ErrNotAbsorbed: a ref in the settled range points at a slot at or past
	// the checkpoint. The store's lease forbids it; never normal.
	ErrNotAbsorbed = errors.New("settle: ref points past the checkpoint")
	// ErrForeign: an object at a settled key holds other bytes than the
	// settle computed for it. Never normal.
	ErrForeign = errors.New("settle: foreign settled object")
	// ErrMismatch: a segment does not hold what its ref says.
	ErrMismatch = errors.New("settle: segment does not match its ref")
)

// errGone: a settled object a ref pointed at is gone: another copy merged
// it away (and swapped the ref) since the refs were read. Re-read.
var errGone = errors.New("settle: settled object gone")

// Settler moves absorbed stream data from chain slots into per-stream
// settled objects. Safe for concurrent use; copies may run at once.
type Settler struct {
	Meta    metastore.Store
	Sets    absorb.Sets
	Settled objstore.Bucket
	// MergeBelowBytes: a stream's last settled object smaller than this
	// (record bytes) is rewritten together with the stream's new data. 0 is
	// DefaultMergeBelowBytes; < 0 never merges.
	MergeBelowBytes int64
	// MaxObjectSpan (0: DefaultMaxObjectSpan; < 0: no bound): a group is
	// merged into the stream's last settled object only while the merged
	// object spans at most this much record time (mergeable).
	MaxObjectSpan time.Duration
	// MaxObjectBytes caps the record bytes of one settled object (0:
	// DefaultMaxObjectBytes). A larger run of refs splits.
	MaxObjectBytes int64
	// MaxSlotsPerStep (0: DefaultMaxSlotsPerStep) and MaxStepsPerRun (0:
	// DefaultMaxStepsPerRun) bound the work of one Step and one Run.
	MaxSlotsPerStep int
	MaxStepsPerRun  int
	// PassIndex settles what the absorb indexed in pass indexes (design
	// 014; absorb.Absorber.Index) in the Settled bucket, instead of refs,
	// from where the chain's indexed passes begin (Head.Indexed; before
	// it, and on a chain not yet indexed, it settles refs as without the
	// switch; without the switch it refuses an indexed step:
	// absorb.ErrIndexed):
	// whole passes from the settled cursor into one run per step (level
	// 1: small streams' segments copied into shared packs, listed in the
	// run index), and per-stream settled objects and one ref
	// (metastore.SettleRef) only for the streams the step flushes. It must
	// match the absorb's switch.
	PassIndex bool
	// FlushBytes (0: DefaultFlushBytes): a stream of a step whose bytes in
	// runs, with the step's, reach this is flushed behind a ref.
	FlushBytes int64
	// FlushAge (0: DefaultFlushAge): a stream whose oldest unflushed entry
	// is in a run this much older than the step (by record timestamps,
	// not the clock) is flushed, and with it the flushed cursor passes
	// that run.
	FlushAge time.Duration
	// MaxAgeFlushes (0: DefaultMaxAgeFlushes; < 0: no bound) bounds the
	// streams a step flushes by age alone (FlushBytes' flushes are not
	// bounded): past it, the streams whose oldest unflushed entry is in the
	// oldest run flush first (then by id), the others in the next steps,
	// so a step's flush work, and so its time, is bounded however many
	// streams turn FlushAge old at once (issue 17: the hourly age flush).
	// It depends on the step's inputs only: copies decide alike.
	MaxAgeFlushes int
	// PackBufferBytes (0: DefaultPackBufferBytes; < 0: never): a step
	// whose packed segments are at most this many bytes holds them all
	// and writes its packs in (stream, seq) order, so a stream's entry is
	// one range (a flush reads it in one GET); a larger step packs in slot
	// order.
	PackBufferBytes int64
	// Fanout (0: DefaultFanout; < 0: never merge): how many consecutive
	// level-1 runs a settle step merges into one merged run (design 014,
	// level 2), each stream's data compacted into one segment.
	Fanout int
	// Window is the cache of the pass index window settle walks (nil: its
	// own). The node shares its readers' (one cache of the window per
	// process, not two: design 014, "Level 2 as built", memory).
	Window *passindex.Window
	// Clock (nil: none) lets a step with no new passes flush a quiet
	// chain (quietFlush; issue 30, ADR 0057): once the newest record of
	// its live runs is FlushAge older than the clock's now, every stream
	// of them is flushed behind a ref and the flushed cursor moves to the
	// settled one, so their packs, retention and deletions do not wait
	// for the chain's next append. Without it a quiet chain's runs stay
	// live until then. The plans never read it: a run and its packs
	// depend on the step's inputs only.
	Clock clock.Clock
	// CPUWorkers (0: no bound) bounds how many of a step's goroutines do
	// its CPU work at once: checking segments' CRCs and copying records
	// into objects and packs (the reads and puts wait outside it). A
	// settle in the star's process (strand dev, the node's in-process
	// settlement, `strand bench`) sets 1, so a step's burst never takes
	// every processor from the star; a settle Lambda runs alone and leaves
	// it unbounded (issue 36, ADR 0077).
	CPUWorkers int
	// Log: nil is slog.Default().
	Log *slog.Logger

	cpuOnce    sync.Once
	cpuSem     chan struct{}
	windowOnce sync.Once
	// objBufs: the buffers of the objects it writes (bufs.go).
	bufsOnce sync.Once
	objBufs  *objBufs
	window   *passindex.Window
	// ahead: the bytes of the flushes' read-ahead spans held or in
	// flight, all streams' together (readahead.go: at most
	// readAheadBytes).
	ahead atomic.Int64
	// The unflushed state kept across steps, per chain (state.go).
	stateMu sync.Mutex
	states  map[metastore.ChainID]*chainState
	// idle: per chain, when this settler first saw its settled cursor
	// where it is (quietFor; under stateMu).
	idle map[metastore.ChainID]idleSeen
	// scratch: every step holds the live runs and computes the state
	// from them (the settle step before issue 17), for tests.
	scratch bool
	// flushPath forces how steps get the flushed streams' entries
	// (flushranged.go; tests).
	flushPath flushPath
	// noCoalesce: flushes read every piece on their own (coalesce.go;
	// tests and benchmarks, for the reads before it).
	noCoalesce bool
}

func (s *Settler) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

func orDefault[T ~int | ~int64](v, d T) T {
	if v == 0 {
		return d
	}
	return v
}

// Result says what one step did.
type Result struct {
	From, To metastore.Cursor // the settled cursor moved from From to To
	Slots    int              // slots walked
	Streams  int              // streams seen in them
	Objects  int              // settled objects in the swaps won
	Merged   int              // swaps won that merged a previous small object
	Lost     bool             // another copy moved the cursor first
	// On the pass index (design 014, level 1):
	Packed  int              // streams packed into the step's run
	Flushes int              // streams flushed (a marker in the run, a ref)
	Packs   int              // packs this copy wrote
	Flushed metastore.Cursor // the flushed cursor after the step
	// Level 2:
	Merges        int // merged runs this step wrote or adopted (0 or 1)
	MergedStreams int // packed entries of the merged run this copy wrote
	// StateBuilt: the step rebuilt the unflushed state from the live runs
	// (a cold settler, another copy moved the head, or a merge), instead
	// of the one it kept from its last step (issue 17).
	StateBuilt bool
}

// Step settles the next range of absorbed slots of chain, [Settled, at most
// MaxSlotsPerStep further, never past the checkpoint), and moves the
// settled cursor over it; or, at an epoch's cut, steps to the next epoch.
// A step commits once (commit): its cursors move in one conditional
// write, so every head is a whole step's.
func (s *Settler) Step(ctx context.Context, c metastore.ChainID) (Result, error) {
	for range maxReplans {
		res, err := s.step(ctx, c)
		if errors.Is(err, errReplan) {
			continue // the stored run is adopted on the next attempt
		}
		return res, err
	}
	// Copies keep storing other plans under this one: they settle it.
	return Result{Lost: true}, nil
}

// maxReplans bounds the plans one Step makes again after finding a
// copy's run of another end: more than a few mean that other copies are
// stepping at once (and settle the chain).
const maxReplans = 8

// errReplan: a copy stored the run at the step's first slot with another
// end (another MaxSlotsPerStep, or a later checkpoint) while this step
// planned: the step is planned again, and adopts it (it is the step's
// plan). It wraps metastore.ErrConflict.
var errReplan = fmt.Errorf("settle: a copy stored another plan of the run: plan again: %w", metastore.ErrConflict)

// step is one attempt of Step, from the head it reads: the step's
// objects and refs (each named by what determines it: design 014, "One
// commit point per step"), its merge (from the head the step makes),
// then one commit of the settled, flushed and merged cursors, on the
// condition that all three are still as read (commit). A copy that read
// the same head computes the same cursors; a copy that lost the commit
// is Lost and wrote nothing another plan depends on.
func (s *Settler) step(ctx context.Context, c metastore.ChainID) (Result, error) {
	h, err := s.Meta.GetHead(ctx, c)
	if err != nil {
		return Result{}, fmt.Errorf("settle %s: %w", c, err)
	}
	st, err := absorb.Follow(ctx, s.Meta, c, h.Settled, h.Checkpoint, orDefault(s.MaxSlotsPerStep, DefaultMaxSlotsPerStep))
	res := Result{From: st.From, To: st.From, Flushed: h.Flushed}
	if err == nil && st.Empty() && s.PassIndex {
		err = s.quietFlush(ctx, c, h, &res)
	}
	if err != nil || st.Empty() {
		return res, err
	}
	indexed, runsFrom, err := s.mode(ctx, c, h, &st)
	if err != nil {
		return res, err
	}
	merged := h.Merged
	ran := st.First < st.End && indexed // a step of runs (runStep)
	if ran {
		hw := h
		hw.Flushed = runsFrom
		if st, res.Flushed, err = s.runStep(ctx, c, hw, st, &res); err != nil {
			return res, fmt.Errorf("settle %s: %w", c, err)
		}
		// Level 2, before the commit, from the head this step makes: a
		// merged run is determined by its group of immutable runs, so it
		// is named by what determines it, as the step's other objects.
		made := h
		made.Settled = st.To
		if made.Flushed.Less(res.Flushed) {
			made.Flushed = res.Flushed
		}
		if merged, err = s.mergeAt(ctx, c, made, &res); err != nil {
			return res, fmt.Errorf("settle %s: %w", c, err)
		}
	} else if st.First < st.End {
		if err := s.refsStep(ctx, c, h, st, &res); err != nil {
			return res, err
		}
	}
	if s.PassIndex && !indexed {
		// A refs step (below Head.Indexed), or an epoch's cut: nothing
		// below is in runs, so flushed follows settled.
		res.Flushed = st.To
	}
	if err := s.commit(ctx, c, h, st.To, res.Flushed, merged, &res); err != nil {
		return res, err
	}
	res.To = st.To
	s.log().Debug("settle step", "chain", c.String(), "from", st.From.String(), "to", st.To.String(),
		"slots", res.Slots, "streams", res.Streams, "objects", res.Objects, "merged", res.Merged,
		"packed", res.Packed, "flushes", res.Flushes, "packs", res.Packs, "flushed", res.Flushed.String(),
		"merges", res.Merges, "merged_streams", res.MergedStreams, "state_built", res.StateBuilt, "lost", res.Lost)
	return res, nil
}

// commit is a step's one commit point: the settled, flushed and merged
// cursors of head h move to settled, flushed and merged (each only
// forward; one that stays is a condition) in one MoveCursors. Lost to a
// copy (ErrConflict: any of them moved since h was read) is not an
// error: res.Lost, and the copy's step is the chain's.
func (s *Settler) commit(ctx context.Context, c metastore.ChainID, h metastore.Head, settled, flushed, merged metastore.Cursor, res *Result) error {
	if flushed.Less(h.Flushed) {
		flushed = h.Flushed
	}
	if settled.Less(merged) {
		// A merged run stored by a copy further on (adopted whatever its
		// end): that copy settles the chain.
		res.Lost = true
		return nil
	}
	err := s.Meta.MoveCursors(ctx, c, []metastore.CursorMove{
		{Kind: metastore.Settled, From: h.Settled, To: settled},
		{Kind: metastore.Flushed, From: h.Flushed, To: flushed},
		{Kind: metastore.Merged, From: h.Merged, To: merged},
	})
	switch {
	case errors.Is(err, metastore.ErrConflict):
		res.Lost = true
		return nil
	case err != nil:
		return fmt.Errorf("settle %s: commit the step %s-%s: %w", c, h.Settled, settled, err)
	}
	s.sawSettled(c, settled)
	return nil
}

// refsStep settles a step of slots in refs mode (below Head.Indexed, or
// without the pass index): per stream, its unsettled refs swapped for
// settled objects (stream).
func (s *Settler) refsStep(ctx context.Context, c metastore.ChainID, h metastore.Head, st absorb.Step, res *Result) error {
	set, err := s.Sets.For(c)
	if err != nil {
		return err
	}
	type span struct{ first, last uint64 }
	spans := make(map[format.StreamID]*span)
	err = set.Walk(ctx, st.Epoch, st.First, st.End, func(sl chain.Slot) error {
		res.Slots++
		for _, e := range sl.Entries {
			if sp := spans[e.Stream]; sp == nil {
				spans[e.Stream] = &span{e.FirstSeq, e.LastSeq()}
			} else {
				sp.first, sp.last = min(sp.first, e.FirstSeq), max(sp.last, e.LastSeq())
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("settle %s: %w", c, err)
	}
	res.Streams = len(spans)
	for _, id := range slices.SortedFunc(maps.Keys(spans), func(a, b format.StreamID) int { return bytes.Compare(a[:], b[:]) }) {
		sp := spans[id]
		objs, merged, err := s.stream(ctx, set, id, sp.first, sp.last, h.Checkpoint)
		if err != nil {
			return fmt.Errorf("settle %s: stream %s: %w", c, id, err)
		}
		res.Objects += objs
		res.Merged += merged
	}
	return nil
}

// streamParts settles stream id's parts of a step's passes (adjacent,
// in seq order, transit locations) into settled objects and refs written
// with SettleRef under the step's settled cursor `from`: groups of at most
// MaxSwapRefs-1 parts and MaxObjectBytes, the first merged with the
// stream's previous settled object when it is small (as Step merges).
// Parts that a ref already holds (a rerun, or another copy) are skipped;
// a lost write re-reads the stream's refs.
func (s *Settler) streamParts(ctx context.Context, set chain.Set, c metastore.ChainID, from metastore.Cursor, id format.StreamID, parts []metastore.Ref, pf *prefetched) (objects, merged int, err error) {
	first, last := parts[0].FirstSeq, parts[len(parts)-1].LastSeq
	for range swapRetries {
		stored, err := s.refs(ctx, id, first, last)
		if err != nil {
			return objects, merged, err
		}
		// next: the first seq no stored ref holds; prev: the ref that ends
		// just before it.
		next := first
		var prev *metastore.Ref
		for i, r := range stored {
			if r.FirstSeq <= next && r.LastSeq >= next {
				next = r.LastSeq + 1
			}
			if r.LastSeq+1 == next {
				prev = &stored[i]
			}
		}
		if next > last {
			return objects, merged, nil
		}
		todo := parts
		for len(todo) > 0 && todo[0].LastSeq < next {
			todo = todo[1:]
		}
		if todo[0].FirstSeq != next {
			return objects, merged, fmt.Errorf("refs end at %d inside the part %d-%d: %w", next-1, todo[0].FirstSeq, todo[0].LastSeq, ErrMismatch)
		}
		if prev != nil && !settledOnly(*prev) {
			prev = nil
		}
		o, m, lost, err := s.settleGroups(ctx, set, id, prev, todo, pf, true, func(src []metastore.Ref, mergedPrev bool, repl metastore.Ref) error {
			var old []metastore.Ref // the absorb wrote no ref: only a merged previous ref is replaced
			if mergedPrev {
				old = src[:1]
			}
			return s.Meta.SettleRef(ctx, c, from, old, repl)
		})
		objects, merged = objects+o, merged+m
		if err != nil {
			return objects, merged, err
		}
		if !lost {
			return objects, merged, nil
		}
	}
	return objects, merged, fmt.Errorf("settles kept losing after %d re-reads: %w", swapRetries, metastore.ErrConflict)
}

// settleGroups settles one run of adjacent refs (or pass index parts) of
// stream id: split into groups (s.groups), the first merged with prev
// when that is a small settled ref (s.mergeable), each rendered into
// settled objects (s.build) and stored by write (src: the group, with
// prev first when merged). lost: an object or a write lost to another
// copy (or trim) since the refs were read; the caller re-reads. pf: the
// pieces a step read ahead (nil: none).
//
// flush: refs are pass index parts written with SettleRef, which replaces
// no stored ref but a merged previous one. A flush's groups end where the
// parts and MaxSwapRefs say, not on MaxObjectBytes, which splits the
// objects inside a ref (their keys name their seqs) and not the refs; so
// copies of one step write refs that end alike, whatever their settings.
// Where the first starts depends on whether it merges the previous ref
// (MergeBelowBytes, MaxObjectSpan: a deploy may change them between two
// copies): SettleRef conditions on the neighbouring refs
// (metastore.SettleApart), so of a copy that merges and one that does not
// the later write fails, re-reads and skips what the first wrote
// (TestSettleFlushRacingCopiesOtherMergeSettings,
// TestSettleKillAtEveryWrite). A refs step replaces the refs with
// SwapRefs, each as it was read, so copies that split otherwise conflict
// instead.
func (s *Settler) settleGroups(ctx context.Context, set chain.Set, id format.StreamID, prev *metastore.Ref, refs []metastore.Ref, pf *prefetched, flush bool,
	write func(src []metastore.Ref, mergedPrev bool, repl metastore.Ref) error) (objects, merged int, lost bool, err error) {
	maxBytes := orDefault(s.MaxObjectBytes, DefaultMaxObjectBytes)
	if flush {
		maxBytes = math.MaxInt64
	}
	for gi, g := range s.groups(refs, maxBytes) {
		src := g
		mergePrev := gi == 0 && prev != nil && s.mergeable(*prev, g, maxBytes)
		if mergePrev {
			src = append([]metastore.Ref{*prev}, g...)
		}
		repl, err := s.build(ctx, set, id, src, pf)
		if errors.Is(err, errGone) {
			return objects, merged, true, nil // a copy merged it away since the refs were read
		}
		if err != nil {
			return objects, merged, false, err
		}
		err = write(src, mergePrev, repl)
		if errors.Is(err, metastore.ErrConflict) {
			return objects, merged, true, nil // another copy (or trim) changed them
		}
		if err != nil {
			return objects, merged, false, fmt.Errorf("write the ref %d-%d: %w", repl.FirstSeq, repl.LastSeq, err)
		}
		objects += len(repl.Locations)
		if mergePrev {
			merged++
			s.dropSuperseded(ctx, *prev, repl)
		}
	}
	return objects, merged, false, nil
}

// dropSuperseded deletes prev's settled object after a swap merged it into
// repl's. A reader holding the old ref re-queries on ErrNotFound; a crash
// before this leaves an orphan for the garbage probe.
func (s *Settler) dropSuperseded(ctx context.Context, prev, repl metastore.Ref) {
	if k := prev.Locations[0].Key; !slices.ContainsFunc(repl.Locations, func(l metastore.Location) bool { return l.Key == k }) {
		if err := s.Settled.Delete(ctx, k); err != nil {
			s.log().Warn("settle: delete superseded settled object", "key", k, "err", err)
		}
	}
}

// Run steps chain until its settled cursor reaches the checkpoint, at most
// MaxStepsPerRun steps. It returns the settled cursor reached.
func (s *Settler) Run(ctx context.Context, c metastore.ChainID) (metastore.Cursor, error) {
	return absorb.RunSteps(orDefault(s.MaxStepsPerRun, DefaultMaxStepsPerRun), func() (metastore.Cursor, metastore.Cursor, error) {
		res, err := s.Step(ctx, c)
		return res.From, res.To, err
	})
}

// stream settles the unsettled refs of stream id that hold seqs in [first,
// last], all below the checkpoint ck.
func (s *Settler) stream(ctx context.Context, set chain.Set, id format.StreamID, first, last uint64, ck metastore.Cursor) (objects, merged int, err error) {
	for range swapRetries {
		refs, err := s.refs(ctx, id, first, last)
		if err != nil {
			return objects, merged, err
		}
		// Unsettled refs in range, as runs of adjacent refs, each with the
		// settled ref just before it (the merge candidate), if any.
		type run struct {
			prev *metastore.Ref
			refs []metastore.Ref
		}
		var runs []run
		lastIn := -2 // index in refs of the last ref put in a run
		for i, r := range refs {
			if r.LastSeq < first || r.FirstSeq > last || settledOnly(r) || !inChain(r, set.Star) {
				continue
			}
			if err := absorbed(r, ck); err != nil {
				return objects, merged, err
			}
			if lastIn == i-1 && refs[i-1].LastSeq+1 == r.FirstSeq {
				runs[len(runs)-1].refs = append(runs[len(runs)-1].refs, r)
				lastIn = i
				continue
			}
			lastIn = i
			var prev *metastore.Ref
			if i > 0 && refs[i-1].LastSeq+1 == r.FirstSeq && settledOnly(refs[i-1]) {
				prev = &refs[i-1]
			}
			runs = append(runs, run{prev: prev, refs: []metastore.Ref{r}})
		}
		lost := false
		for _, rn := range runs {
			o, m, l, err := s.settleGroups(ctx, set, id, rn.prev, rn.refs, nil, false, func(src []metastore.Ref, _ bool, repl metastore.Ref) error {
				return s.Meta.SwapRefs(ctx, src, repl)
			})
			objects, merged = objects+o, merged+m
			if err != nil {
				return objects, merged, err
			}
			if lost = l; lost {
				break
			}
		}
		if !lost {
			return objects, merged, nil
		}
	}
	return objects, merged, fmt.Errorf("swaps kept losing after %d re-reads: %w", swapRetries, metastore.ErrConflict)
}

// refs returns stream id's refs that hold seqs in [first-1, last] (the one
// ending at first-1 is the merge candidate), in seq order.
func (s *Settler) refs(ctx context.Context, id format.StreamID, first, last uint64) ([]metastore.Ref, error) {
	from := first
	if from > 0 {
		from--
	}
	var out []metastore.Ref
	for {
		page, err := s.Meta.QueryRefs(ctx, id.String(), from, 100)
		if err != nil {
			return nil, fmt.Errorf("query refs from %d: %w", from, err)
		}
		for _, r := range page {
			if r.FirstSeq > last {
				return out, nil
			}
			out = append(out, r)
		}
		// Only an empty page ends the refs: a page stops at 1 MB
		// (metastore.QueryPage), short of the limit while more follow.
		if len(page) == 0 || page[len(page)-1].LastSeq == ^uint64(0) {
			return out, nil
		}
		from = page[len(page)-1].LastSeq + 1
	}
}

func settledOnly(r metastore.Ref) bool {
	for _, l := range r.Locations {
		if !l.Settled {
			return false
		}
	}
	return true
}

// inChain reports whether r's transit locations are slots of star's
// chain. A stream moved away and back (ADR 0065; in refs mode a move back
// does not wait for settle) has parts in this chain from two periods, and
// a step's seq span of it then holds the refs of the star it was moved
// to as well: those are that chain's to settle, against its own
// checkpoint (review3: taking them here failed every step of this
// chain, "ref points past the checkpoint", once that star's epoch passed
// this one's).
func inChain(r metastore.Ref, star string) bool {
	for _, l := range r.Locations {
		if l.Settled {
			continue
		}
		if s, _, _, ok := chain.ParseSlotKey(l.Key); ok && s != star {
			return false
		}
	}
	return true
}

// absorbed checks that every transit location of r is below ck.
func absorbed(r metastore.Ref, ck metastore.Cursor) error {
	for _, l := range r.Locations {
		if l.Settled {
			continue
		}
		_, e, slot, ok := chain.ParseSlotKey(l.Key)
		if !ok {
			return fmt.Errorf("ref %s@%d: location key %q is not a slot: %w", r.StreamID, r.FirstSeq, l.Key, ErrMismatch)
		}
		if !(metastore.Cursor{Epoch: e, Slot: slot}).Less(ck) {
			return fmt.Errorf("ref %s@%d: slot %d/%d, checkpoint %s: %w", r.StreamID, r.FirstSeq, e, slot, ck, ErrNotAbsorbed)
		}
	}
	return nil
}

// groups splits adjacent refs into runs that each become one ref: at
// most MaxSwapRefs-1 refs (room for a merged predecessor) and maxBytes
// of records.
func (s *Settler) groups(refs []metastore.Ref, maxBytes int64) [][]metastore.Ref {
	var out [][]metastore.Ref
	var g []metastore.Ref
	var n int64
	for _, r := range refs {
		if len(g) > 0 && (len(g) == metastore.MaxSwapRefs-1 || n+r.Bytes > maxBytes) {
			out = append(out, g)
			g, n = nil, 0
		}
		g = append(g, r)
		n += r.Bytes
	}
	return append(out, g)
}

// mergeable reports whether group g of a stream's refs is merged into
// prev, the stream's last settled object: when prev is small and the
// two hold at most maxBytes of records, and, since retention drops whole objects, when
// g's last record is at most MaxObjectSpan (by record time) later than
// prev's first, so that no merge makes an object span more than that and
// none of its records outlive its retention by more (issue 30).
func (s *Settler) mergeable(prev metastore.Ref, g []metastore.Ref, maxBytes int64) bool {
	below := orDefault(s.MergeBelowBytes, DefaultMergeBelowBytes)
	if below < 0 || len(prev.Locations) != 1 || !prev.Locations[0].Settled || prev.Bytes >= below {
		return false
	}
	if span := orDefault(s.MaxObjectSpan, DefaultMaxObjectSpan); span > 0 && g[len(g)-1].LastTsMs-prev.FirstTsMs > span.Milliseconds() {
		return false
	}
	var n int64
	for _, r := range g {
		n += r.Bytes
	}
	return prev.Bytes+n <= maxBytes
}

// build renders the settled objects that replace old (adjacent refs of
// stream id), writes each (put) as soon as it is complete, and returns the
// ref that points at them, one location per object in seq order. Objects
// split at record boundaries, inside a ref when it is larger, so that each
// holds at most MaxObjectBytes of records (one record larger than that is
// an object of its own), and at most MaxObjectsPerRef objects (see there).
// Memory: the object being built, the span being read and the read-ahead
// (spanReader: at most readAheadGets spans, all streams' together at most
// readAheadBytes), whatever the size of the refs. A settled location pf
// holds is taken from it instead of read (coalesce.go), with the same
// checks.
func (s *Settler) build(ctx context.Context, set chain.Set, id format.StreamID, old []metastore.Ref, pf *prefetched) (metastore.Ref, error) {
	var left int64 // the refs' record bytes not yet added (as the refs say)
	for _, r := range old {
		left += max(r.Bytes, 0)
	}
	first, last := old[0], old[len(old)-1]
	repl := metastore.Ref{StreamID: id.String(), FirstSeq: first.FirstSeq, LastSeq: last.LastSeq,
		FirstTsMs: first.FirstTsMs, LastTsMs: last.LastTsMs,
		Producers: mergeMarks(old),   // a successor's dedupe table survives settlement
		Commands:  lastCommands(old)} // and so do its fencing token and trim point
	repl.Carried, repl.CarriedBelow = lastCarried(old) // the newest table the star carried (ADR 0062)
	var cur *format.SettledBuilder
	var curMax int64 // the record bytes cur may hold
	// objMax is what the next object may hold: MaxObjectBytes, or the
	// records left spread over the objects the ref may still point at;
	// the last one takes everything left.
	objMax := func() int64 {
		slots := int64(MaxObjectsPerRef - len(repl.Locations))
		if slots <= 1 {
			return math.MaxInt64
		}
		return max(orDefault(s.MaxObjectBytes, DefaultMaxObjectBytes), (left+slots-1)/slots)
	}
	flush := func() error {
		obj, h, err := cur.Finish()
		if err != nil {
			return err
		}
		cur = nil
		key := format.SettledKey(id, h.FirstSeq, h.LastSeq)
		err = s.put(ctx, key, obj)
		s.bufs().put(obj) // the put returned: obj was lent, not given
		if err != nil {
			return err
		}
		repl.Locations = append(repl.Locations, metastore.Location{Settled: true, Key: key,
			Offset: format.SettledHeaderSize, Length: int64(len(obj) - format.SettledHeaderSize), FirstSeq: h.FirstSeq})
		return nil
	}
	// add appends the records of recs (encoded, n of them, from seq) to
	// the current object, starting a new one where the next record would
	// take it past maxObj.
	add := func(recs []byte, seq uint64, n uint32) error {
		off, i := 0, uint32(0)
		for i < n {
			// The longest run of whole records from off that fits.
			end, j := off, i
			for j < n {
				if len(recs)-end < 4 {
					return fmt.Errorf("record %d of a segment at seq %d: truncated: %w", j, seq, ErrMismatch)
				}
				rl := 4 + int64(binary.BigEndian.Uint32(recs[end:]))
				if rl > int64(len(recs)-end) || rl < minRecord {
					return fmt.Errorf("record %d of a segment at seq %d: %d bytes of %d left: %w", j, seq, rl, len(recs)-end, ErrMismatch)
				}
				size, limit := int64(end-off)+rl, objMax()
				if cur != nil {
					size, limit = size+int64(cur.Len()), curMax
				}
				if size > limit && (end > off || (cur != nil && cur.Count() > 0)) {
					break
				}
				end += int(rl)
				j++
			}
			if end == off { // the current object is full
				if err := flush(); err != nil {
					return err
				}
				continue
			}
			if cur == nil {
				curMax = objMax()
				hint := int(min(curMax, left, orDefault(s.MaxObjectBytes, DefaultMaxObjectBytes)))
				cur = format.NewSettledBuilderIn(s.bufs().get(format.SettledBufferSize(hint)), id, seq+uint64(i), hint)
			}
			ts0, ts1 := format.RecordTimestamp(recs[off:]), lastTimestamp(recs[off:end])
			s.cpuBegin()
			err := cur.Add(recs[off:end], int(j-i), ts0, ts1)
			s.cpuEnd(end - off)
			if err != nil {
				return err
			}
			left -= int64(end - off)
			off, i = end, j
			if i != n {
				if err := flush(); err != nil { // stopped for size: the object is full
					return err
				}
			}
		}
		if off != len(recs) {
			return fmt.Errorf("segment at seq %d: %d bytes after its %d records: %w", seq, len(recs)-off, n, ErrMismatch)
		}
		return nil
	}
	next := first.FirstSeq
	var locs []metastore.Location // every location, in order, for spans
	for _, r := range old {
		locs = append(locs, r.Locations...)
	}
	sp := newSpanReader(ctx, s, set, locs, pf)
	defer sp.close()
	for _, r := range old {
		for _, l := range r.Locations {
			info, recs, err := sp.next()
			if err != nil {
				return metastore.Ref{}, fmt.Errorf("ref %d-%d: %s: %w", r.FirstSeq, r.LastSeq, l.Key, err)
			}
			if info.Stream != id || info.FirstSeq != next {
				return metastore.Ref{}, fmt.Errorf("%s: segment of %s at %d, want %s at %d: %w", l.Key, info.Stream, info.FirstSeq, id, next, ErrMismatch)
			}
			if err := add(recs, next, info.Count); err != nil {
				return metastore.Ref{}, fmt.Errorf("ref %d-%d: %s: %w", r.FirstSeq, r.LastSeq, l.Key, err)
			}
			next += uint64(info.Count)
			repl.Bytes += int64(len(recs))
		}
		if next != r.LastSeq+1 {
			return metastore.Ref{}, fmt.Errorf("ref %d-%d: segments end at %d: %w", r.FirstSeq, r.LastSeq, next-1, ErrMismatch)
		}
	}
	if cur != nil {
		if err := flush(); err != nil {
			return metastore.Ref{}, err
		}
	}
	return repl, nil
}

// minRecord is the smallest encoded record: length, timestamp, header count.
const minRecord = 4 + 8 + 2

// lastTimestamp is the timestamp of the last of the whole records in b.
func lastTimestamp(b []byte) int64 {
	off := 0
	for {
		n := 4 + int(binary.BigEndian.Uint32(b[off:]))
		if off+n >= len(b) {
			return format.RecordTimestamp(b[off:])
		}
		off += n
	}
}

func (s *Settler) checkSegment(b []byte) error {
	_, _, err := s.parse(b)
	return err
}

// parseSegment is format.ParseSegment, the one place settle checks a
// segment's CRC (a variable so that tests count the checks).
var parseSegment = format.ParseSegment

// parse is parseSegment as CPU work (cpuBegin, cpuEnd).
func (s *Settler) parse(b []byte) (format.SegmentInfo, []byte, error) {
	s.cpuBegin()
	defer s.cpuEnd(len(b))
	return parseSegment(b)
}

// checked is a segment whose CRC parseSegment checked: its header and
// its records.
type checked struct {
	info format.SegmentInfo
	recs []byte
}

// transitSegment reads a transit location's segment from the first copy
// in the set that passes its check, and returns that check's parse: each
// segment's CRC is computed once (issue 36: build parsed it a second
// time). The bytes are only read (copied into the settled object), so
// they are viewed (chain.Set.ViewRange), not copied.
func (s *Settler) transitSegment(ctx context.Context, set chain.Set, l metastore.Location) (checked, error) {
	var mu sync.Mutex
	type pass struct {
		body []byte
		seg  checked
	}
	var passed []pass // the copies that passed (a hedged loser's too)
	body, err := set.ViewRange(ctx, l.Key, l.Offset, l.Length, func(b []byte) error {
		info, recs, err := s.parse(b)
		if err == nil {
			mu.Lock()
			passed = append(passed, pass{b, checked{info, recs}})
			mu.Unlock()
		}
		return err
	})
	if err != nil {
		return checked{}, err
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range passed {
		if sameSlice(p.body, body) {
			return p.seg, nil
		}
	}
	panic(fmt.Sprintf("settle: read %s: the copy returned is not one that passed its check", l.Key))
}

// sameSlice: a and b are the same bytes in memory.
func sameSlice(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// segment reads a settled location's bytes from the settled bucket (a
// span of segments; the caller parses them), for reading only
// (objstore.View).
func (s *Settler) segment(ctx context.Context, l metastore.Location) ([]byte, error) {
	b, err := objstore.View(ctx, s.Settled, l.Key, l.Offset, l.Length)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, fmt.Errorf("read settled %s: %w: %w", l.Key, errGone, err)
	}
	if err != nil {
		return nil, fmt.Errorf("read settled %s: %w", l.Key, err)
	}
	if int64(len(b)) != l.Length {
		return nil, fmt.Errorf("read settled %s: %d of %d bytes: %w", l.Key, len(b), l.Length, ErrMismatch)
	}
	return b, nil
}

// put writes a settled object. The key names the stream and seq range, and
// records never change, so an object already there must hold the same
// bytes: a rerun (or a racing copy) wrote it. obj is lent to the bucket
// (PutIfAbsent, absorb.PutDeterminedLent): the caller may reuse it once
// put returns (bufs.go).
func (s *Settler) put(ctx context.Context, key string, obj []byte) error {
	err := absorb.PutDeterminedLent(ctx, s.Settled, key, obj)
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		// Written by another copy, swapped, then merged away and deleted:
		// the refs have moved on.
		return fmt.Errorf("%w: %w", errGone, err)
	case errors.Is(err, absorb.ErrForeign):
		return fmt.Errorf("%w: %w", ErrForeign, err)
	}
	return err
}
