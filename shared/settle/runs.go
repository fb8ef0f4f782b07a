package settle

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
)

// Flush defaults (design 014, levels 1 and 2). The age bounds how long
// runs stay live, so with merges (Fanout level-1 runs into one merged
// run) it bounds the memory of every window that caches them and the runs
// a flush reads: about Fanout - 1 level-1 runs and FlushAge / (Fanout x
// settle interval) merged runs (60 with a one-minute settle). It also
// bounds how long a record's bytes outlive its retention or its stream's
// deletion (packs go once every stream of their run is flushed) and how
// long a stream's records wait for a ref (with Settler.MaxObjectSpan,
// how long they outlive their retention): 1 h, so that records
// are gone from storage within about an hour of expiring (issue 30;
// docs/api.md, "Retention and deletion"). It costs flushes: at most one
// per stream touched per hour, 2.8 a second at 10,000 streams (16 item
// writes/s, $/GiB +10% on the 2 MB/s bench) and 278 at 1,000,000 (566
// item writes/s, $5.24/GiB against $0.70 at 24 h: docs/performance/settle.md,
// "The flush age"); a deployment of that size without short retentions
// may set a longer age and lose the one-hour bound.
const (
	DefaultFlushBytes = 4 << 20
	DefaultFlushAge   = time.Hour
	// DefaultPackBufferBytes: a step whose packed segments are at most this
	// many bytes sorts them by stream (Settler.PackBufferBytes).
	DefaultPackBufferBytes = 256 << 20
	// flushWorkers bounds the flushes of one step in flight (each a few
	// GETs and a PUT of the settled bucket).
	flushWorkers = 64
	// DefaultMaxAgeFlushes bounds the streams one step flushes by age
	// (Settler.MaxAgeFlushes): the hourly age flush at 1,000,000 active
	// streams (1 in 24 of them, each read from every live run it is in: up
	// to 83 GETs) spread over 6 one-minute steps, each well inside
	// the settle Lambda's timeout (docs/performance/settle.md, "The hourly step at
	// 1,000,000 streams").
	DefaultMaxAgeFlushes = 8192
)

// defaultMaxAgeFlushes is MaxAgeFlushes' default (a variable for tests).
var defaultMaxAgeFlushes = DefaultMaxAgeFlushes

// maxAgeFlushes is the bound on a step's flushes by age (< 0: none).
func (s *Settler) maxAgeFlushes() int {
	if s.MaxAgeFlushes == 0 {
		return defaultMaxAgeFlushes
	}
	return s.MaxAgeFlushes
}

// unflushed is one stream's packed entries in the live runs after its
// last marker: what a flush of it would write behind a ref.
type unflushed struct {
	c      metastore.ChainID
	runs   []*format.PassIndex  // the run of each entry
	ents   []*format.PassStream // the packed entries, in seq order
	oldest int                  // index in the live runs of the run of ents[0]
	bytes  int64
}

// refs are u's entries as refs (settled locations in packs), built only
// for the streams a step flushes.
func (u *unflushed) refs() []metastore.Ref {
	out := make([]metastore.Ref, len(u.ents))
	for i, e := range u.ents {
		out[i] = passindex.RunRef(u.c, u.runs[i], e)
	}
	return out
}

// stepPart is one stream's parts of a step's passes.
type stepPart struct {
	refs []metastore.Ref      // transit locations, in seq order
	raw  []*format.PassStream // the same, as the pass indexes say
}

func (p *stepPart) bytes() int64 {
	var n int64
	for _, r := range p.refs {
		n += r.Bytes
	}
	return n
}

// runStep is a settle step on the pass index (design 014, level 1): the
// run at the step's first slot is its plan, adopted when a copy wrote it,
// else made from the live runs [h.Flushed, h.Settled) and the passes that
// start in the step's slots (makePlan); then the plan's flushes are
// written (a settled object and a ref per marker, SettleRef under the
// settled cursor). It returns the step extended to the plan's end and the
// flushed cursor after it: the first run still holding an entry no ref
// holds, or the plan's end.
func (s *Settler) runStep(ctx context.Context, c metastore.ChainID, h metastore.Head, st absorb.Step, res *Result) (absorb.Step, metastore.Cursor, error) {
	s.initWindow()
	set, err := s.Sets.For(c)
	if err != nil {
		return st, h.Flushed, err
	}
	// The unflushed state of the live runs [h.Flushed, st.From): kept from
	// the last step when it is of this head, else rebuilt (state.go).
	key := stateKey{flushed: h.Flushed, merged: h.Merged, settled: st.From}
	var (
		cs  *chainState
		old map[format.StreamID]*unflushed // s.scratch: the runs held
	)
	if s.scratch {
		cs, old, err = s.scratchState(ctx, c, key)
	} else if cs = s.takeState(c, key); cs == nil {
		cs, err = s.buildState(ctx, c, key)
		res.StateBuilt = true
	}
	if err != nil {
		return st, h.Flushed, err
	}
	plan, err := s.window.Run(ctx, c, st.From)
	end := metastore.Cursor{Epoch: st.Epoch, Slot: st.End}
	switch {
	case err == nil:
		end.Slot = plan.EndSlot // a copy made the plan: adopt it
	case !errors.Is(err, objstore.ErrNotFound):
		return st, h.Flushed, err
	}
	passes, err := s.window.Passes(ctx, c, st.From, end)
	if err != nil {
		return st, h.Flushed, err
	}
	if len(passes) == 0 {
		return st, h.Flushed, fmt.Errorf("no pass from %s to %s: %w", st.From, end, passindex.ErrWindow)
	}
	step := map[format.StreamID]*stepPart{}
	for _, p := range passes {
		res.Slots += int(p.EndSlot - p.FirstSlot)
		for i := range p.Streams {
			ps := &p.Streams[i]
			sp := step[ps.Stream]
			if sp == nil {
				sp = &stepPart{}
				step[ps.Stream] = sp
			}
			sp.refs = append(sp.refs, passindex.PassRef(c.Star, p.Epoch, ps))
			sp.raw = append(sp.raw, ps)
		}
	}
	res.Streams = len(step)
	if plan == nil {
		if plan, err = s.makePlan(ctx, set, c, st.From, passes, cs, step, res); err != nil {
			return st, h.Flushed, err
		}
	} else if plan.EndSlot != passes[len(passes)-1].EndSlot {
		return st, h.Flushed, fmt.Errorf("run at %s ends at %d, its passes at %d: %w", st.From, plan.EndSlot, passes[len(passes)-1].EndSlot, passindex.ErrWindow)
	}
	// The flushes: one settled object (or a few) and one ref per marker,
	// flushWorkers streams at a time (they are independent).
	flushed := map[format.StreamID]bool{}
	var markers []*format.PassStream
	var ids []format.StreamID
	for i := range plan.Streams {
		m := &plan.Streams[i]
		if !m.Marker() {
			res.Packed++
			continue
		}
		flushed[m.Stream] = true
		markers = append(markers, m)
		ids = append(ids, m.Stream)
	}
	// The flushed streams' unflushed entries: only theirs, fetched by one
	// walk of the live runs through the window's cache.
	var entries map[format.StreamID][]metastore.Ref
	if s.scratch {
		entries = map[format.StreamID][]metastore.Ref{}
		for _, id := range ids {
			if u := old[id]; u != nil {
				entries[id] = u.refs()
			}
		}
	} else if entries, err = s.unflushedRefs(ctx, c, cs, ids); err != nil {
		return st, h.Flushed, err
	}
	// Each marker's parts, checked before any flush starts.
	partsOf := make([][]metastore.Ref, len(markers))
	for i, m := range markers {
		parts := entries[m.Stream]
		if sp := step[m.Stream]; sp != nil {
			parts = append(parts, sp.refs...)
		}
		parts = slices.DeleteFunc(parts, func(r metastore.Ref) bool { return r.LastSeq < m.FirstSeq || r.FirstSeq > m.LastSeq })
		if len(parts) == 0 || parts[0].FirstSeq != m.FirstSeq || parts[len(parts)-1].LastSeq != m.LastSeq {
			return st, h.Flushed, fmt.Errorf("stream %s: the marker %d-%d of the run at %s is not its unflushed parts: %w", m.Stream, m.FirstSeq, m.LastSeq, st.From, ErrMismatch)
		}
		partsOf[i] = parts
	}
	entries = nil
	if err := s.flushStreams(ctx, set, c, st.From, ids, partsOf, res); err != nil {
		return st, h.Flushed, err
	}
	// Flushed after the plan: the first run holding an entry of a stream
	// not flushed since, else the plan's end.
	to := metastore.Cursor{Epoch: plan.Epoch, Slot: plan.EndSlot}
	newFlushed := to
	if s.scratch {
		// Every stream visited (the step before the index).
		for id, u := range cs.streams {
			if at := cs.run(u.oldest).at; !flushed[id] && at.Less(newFlushed) {
				newFlushed = at
			}
		}
		if res.Packed > 0 && st.From.Less(newFlushed) {
			newFlushed = st.From
		}
	} else {
		// The state with this step's run added (its markers remove the
		// flushed streams, its packed entries add the new ones, at its
		// start): the first run whose count is not zero.
		cs.fold(plan)
		newFlushed = cs.firstHeld(to)
	}
	st.End, st.To = plan.EndSlot, to
	s.window.Prune(c, to)
	s.window.PruneRuns(c, newFlushed)
	if !s.scratch {
		// The state of the next step's head, if the cursors move as this
		// step computed: this step's run added (above), the runs below
		// the new flushed cursor dropped.
		// (A state that cannot drop them is not kept: the next step
		// rebuilds. It cannot happen: every stream left has its oldest
		// entry at or past newFlushed.)
		if err := cs.dropBelow(newFlushed); err != nil {
			s.log().Warn("settle: unflushed state not kept", "chain", c.String(), "err", err)
		} else {
			cs.key = stateKey{flushed: newFlushed, merged: h.Merged, settled: to}
			s.putState(c, cs)
		}
	}
	return st, newFlushed, nil
}

// flushStreams flushes each stream ids[i] of a step at `from` (the
// settled cursor) with its parts partsOf[i] (streamParts), flushWorkers
// streams at a time (they are independent), and counts them in res.
// First it reads the small settled pieces of all of them by object,
// neighbours coalesced into one ranged GET (prefetch, coalesce.go): the
// flushes take those from what it read, and read the rest as before.
func (s *Settler) flushStreams(ctx context.Context, set chain.Set, c metastore.ChainID, from metastore.Cursor, ids []format.StreamID, partsOf [][]metastore.Ref, res *Result) error {
	pf := s.prefetch(ctx, partsOf)
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, flushWorkers)
	)
	for i, id := range ids {
		parts := partsOf[i]
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			objs, merged, err := s.streamParts(ctx, set, c, from, id, parts, pf)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("flush stream %s: %w", id, err))
				return
			}
			res.Flushes++
			res.Objects += objs
			res.Merged += merged
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// initWindow makes the settler's cache of the window once.
func (s *Settler) initWindow() {
	// A cold settler (a Lambda's first step) lists the window and GETs it
	// in parallel; without the List grant it walks one GET at a time.
	s.windowOnce.Do(func() {
		s.window = s.Window
		if s.window == nil {
			s.window = &passindex.Window{Meta: s.Meta, Bucket: s.Settled, Parallel: passindex.DefaultColdLoadParallel}
		}
	})
}

// unflushedOf is, per stream, its packed entries of the live runs after
// its last marker, and each run's time: the latest LastTsMs of its
// entries.
func unflushedOf(c metastore.ChainID, runs []*format.PassIndex) (map[format.StreamID]*unflushed, []int64) {
	state := map[format.StreamID]*unflushed{}
	times := make([]int64, len(runs))
	for ri, r := range runs {
		for i := range r.Streams {
			e := &r.Streams[i]
			times[ri] = max(times[ri], e.LastTsMs)
			if e.Marker() {
				delete(state, e.Stream)
				continue
			}
			u := state[e.Stream]
			if u == nil {
				u = &unflushed{c: c, oldest: ri}
				state[e.Stream] = u
			}
			u.runs, u.ents = append(u.runs, r), append(u.ents, e)
			u.bytes += e.Bytes
		}
	}
	return state, times
}

// decide is the plan's decision (makePlan): the markers of the streams
// the step flushes and the streams it packs, in stream id order, from
// the unflushed state and the step's passes alone. A stream of the step
// is flushed when its unflushed bytes with the step's reach FlushBytes;
// any stream is when its oldest unflushed entry's run is FlushAge older
// than the step's time (the latest record timestamp of the live runs and
// the passes; the step's own parts are of the step's time). It visits the
// step's streams and those of the runs FlushAge old (the state's index),
// not the other streams of the state (s.scratch: every stream, the step
// before the index, for tests).
func (s *Settler) decide(passes []*format.PassIndex, cs *chainState, step map[format.StreamID]*stepPart) ([]format.PassStream, []format.StreamID) {
	flushBytes := orDefault(s.FlushBytes, DefaultFlushBytes)
	ageMs := orDefault(s.FlushAge, DefaultFlushAge).Milliseconds()
	var now int64
	for _, r := range cs.runs {
		now = max(now, r.time)
	}
	for _, p := range passes {
		for i := range p.Streams {
			now = max(now, p.Streams[i].LastTsMs)
		}
	}
	ids := make([]format.StreamID, 0, len(step))
	for id := range step {
		ids = append(ids, id)
	}
	other := func(id format.StreamID) {
		if step[id] == nil {
			ids = append(ids, id)
		}
	}
	if s.scratch {
		for id := range cs.streams {
			other(id)
		}
	} else {
		cs.aged(now, ageMs, other)
	}
	slices.SortFunc(ids, func(a, b format.StreamID) int { return bytes.Compare(a[:], b[:]) })
	ids = slices.Compact(ids)
	// Which streams flush: by bytes always; by age only (aged), at most
	// maxAge of them, the oldest first (by their oldest entry's run, then
	// id): the rest flush in the next steps.
	type aged struct {
		i  int
		at metastore.Cursor
	}
	var byAge []aged
	flush := make([]bool, len(ids))
	for i, id := range ids {
		u, ok := cs.streams[id]
		sp := step[id]
		b := u.bytes
		if sp != nil {
			b += sp.bytes()
		}
		oldest := now // the step's own parts are of the step's time
		if ok {
			oldest = cs.run(u.oldest).time
		}
		switch {
		case sp != nil && b >= flushBytes:
			flush[i] = true
		case now-oldest >= ageMs:
			a := aged{i: i}
			if ok {
				a.at = cs.run(u.oldest).at
			} else {
				a.at = metastore.Cursor{Epoch: math.MaxUint64, Slot: math.MaxUint64} // the step's own: newest
			}
			byAge = append(byAge, a)
		}
	}
	if maxAge := s.maxAgeFlushes(); maxAge >= 0 && len(byAge) > maxAge {
		// ids is sorted, so a stable sort by run leaves each run's in id order.
		slices.SortStableFunc(byAge, func(a, b aged) int {
			switch {
			case a.at.Less(b.at):
				return -1
			case b.at.Less(a.at):
				return 1
			}
			return 0
		})
		byAge = byAge[:maxAge]
	}
	for _, a := range byAge {
		flush[a.i] = true
	}
	var markers []format.PassStream
	var packed []format.StreamID
	for i, id := range ids {
		u, ok := cs.streams[id]
		sp := step[id]
		if flush[i] {
			m := format.PassStream{Stream: id}
			if ok {
				m.FirstSeq, m.FirstTsMs, m.LastSeq, m.LastTsMs = u.firstSeq, u.firstTs, u.lastSeq, u.lastTs
			}
			if sp != nil {
				first, last := sp.refs[0], sp.refs[len(sp.refs)-1]
				if !ok {
					m.FirstSeq, m.FirstTsMs = first.FirstSeq, first.FirstTsMs
				}
				m.LastSeq, m.LastTsMs = last.LastSeq, last.LastTsMs
			}
			markers = append(markers, m)
			continue
		}
		if sp != nil {
			packed = append(packed, id)
		}
	}
	return markers, packed
}

// makePlan decides the step's flushes (decide), copies the other streams'
// segments into packs and writes the run index at `from` (PutIfAbsent); a
// run index already there (a copy racing) is adopted instead. The
// decision depends on the inputs only, never on the clock.
func (s *Settler) makePlan(ctx context.Context, set chain.Set, c metastore.ChainID, from metastore.Cursor, passes []*format.PassIndex,
	cs *chainState, step map[format.StreamID]*stepPart, res *Result) (*format.PassIndex, error) {
	plan := &format.PassIndex{Epoch: from.Epoch, FirstSlot: from.Slot, EndSlot: passes[len(passes)-1].EndSlot}
	var packed []format.StreamID
	plan.Streams, packed = s.decide(passes, cs, step)
	entries, packs, err := s.pack(ctx, set, c, plan, packed, step)
	if err != nil {
		return nil, err
	}
	res.Packs = packs
	plan.Streams = append(plan.Streams, entries...)
	slices.SortFunc(plan.Streams, func(a, b format.PassStream) int { return bytes.Compare(a.Stream[:], b.Stream[:]) })
	key := format.RunIndexKey(c.Star, c.Class.String(), from.Epoch, from.Slot)
	if written, err := s.putRun(ctx, key, plan); err != nil {
		return nil, err
	} else if written {
		s.window.AddRun(c, plan)
		return plan, nil
	}
	// A copy wrote the run first (or our write's outcome is unknown): the
	// run stored is the plan, whatever it says.
	got, err := s.window.Run(ctx, c, from)
	if err != nil {
		return nil, fmt.Errorf("read back the run %s: %w", key, err)
	}
	if got.EndSlot != plan.EndSlot {
		return nil, fmt.Errorf("the run at %s stored ends at %d, this step's passes at %d: %w", from, got.EndSlot, plan.EndSlot, errReplan)
	}
	return got, nil
}

// packFetches is how many slot reads pack keeps in flight ahead of the
// one it copies.
const packFetches = 16

// slotSeg is one packed stream's segment in a slot of the step.
type slotSeg struct {
	entry int // index in the packed entries
	seg   format.PassSegment
}

// pack copies the segments of the packed streams of the step, read slot
// by slot (one ranged GET per slot, packFetches in flight), back to back
// into the run's packs of at most MaxObjectBytes each (the run's last
// possible pack, first slot + slots - 1, takes what is left), writing each
// pack as soon as it is full, and returns the streams' packed entries
// (their segments located in packs) and the packs written. The segments
// go in (stream, seq) order when the step's packed bytes are at most
// PackBufferBytes (they are all held, then copied), else in slot order
// (memory: the slots in flight and one pack). The choice depends on the
// inputs and the configuration only, so copies write the same packs.
func (s *Settler) pack(ctx context.Context, set chain.Set, c metastore.ChainID, run *format.PassIndex, ids []format.StreamID,
	step map[format.StreamID]*stepPart) ([]format.PassStream, int, error) {
	entries := make([]format.PassStream, len(ids))
	src := make([][]format.PassSegment, len(ids)) // each entry's segments in the slots, in seq order
	bySlot := map[uint64][]slotSeg{}
	var slots []uint64
	var total int64
	for i, id := range ids {
		sp := step[id]
		first, last := sp.raw[0], sp.raw[len(sp.raw)-1]
		e := format.PassStream{Stream: id, FirstSeq: first.FirstSeq, LastSeq: last.LastSeq, FirstTsMs: first.FirstTsMs, LastTsMs: last.LastTsMs}
		var marks []format.PassMark
		for _, ps := range sp.raw {
			e.Bytes += ps.Bytes
			marks = append(marks, ps.Marks...)
			if ps.Commands != nil {
				cs := *ps.Commands
				e.Commands = &cs
			}
			for _, g := range ps.Segments {
				if bySlot[g.Slot] == nil {
					slots = append(slots, g.Slot)
				}
				bySlot[g.Slot] = append(bySlot[g.Slot], slotSeg{entry: i, seg: g})
				src[i] = append(src[i], g)
				total += int64(g.Length)
			}
		}
		if len(marks) > 0 {
			rm := make([]metastore.ProducerMark, len(marks))
			for j, m := range marks {
				rm[j] = metastore.ProducerMark{Producer: m.Producer, BatchSeq: m.BatchSeq, FirstSeq: m.FirstSeq, LastSeq: m.LastSeq}
			}
			for _, m := range metastore.TrimMarks(rm) {
				e.Marks = append(e.Marks, format.PassMark{Producer: m.Producer, BatchSeq: m.BatchSeq, FirstSeq: m.FirstSeq, LastSeq: m.LastSeq})
			}
		}
		e.Carried, e.CarriedBelow = lastPassCarried(sp.raw) // the newest carried table (ADR 0062)
		entries[i] = e
	}
	slices.Sort(slots)
	// Fetch each slot's span of the packed segments, in order, some ahead.
	type fetched struct {
		body []byte
		off  int64
		err  error
	}
	results := make([]chan fetched, len(slots))
	for i := range results {
		results[i] = make(chan fetched, 1)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, packFetches)
	go func() {
		for i, slot := range slots {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			go func() {
				segs := bySlot[slot]
				lo, hi := int64(segs[0].seg.Offset), int64(0)
				for _, g := range segs {
					lo, hi = min(lo, int64(g.seg.Offset)), max(hi, int64(g.seg.Offset)+int64(g.seg.Length))
				}
				key := format.SlotKey(c.Star, run.Epoch, slot)
				// Only read (copied into the pack): viewed, not copied.
				body, err := set.ViewRange(ctx, key, lo, hi-lo, func(b []byte) error {
					for _, g := range segs {
						if err := s.checkSegment(b[int64(g.seg.Offset)-lo : int64(g.seg.Offset)-lo+int64(g.seg.Length)]); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					err = fmt.Errorf("read %s: %w", key, err)
				}
				results[i] <- fetched{body, lo, err}
			}()
		}
	}()
	maxBytes := orDefault(s.MaxObjectBytes, DefaultMaxObjectBytes)
	// Sorted: when the step's packed segments fit in PackBufferBytes they
	// are all read first, then copied in (stream, seq) order, so that a
	// stream's entry is one range of one pack (a flush reads it in one
	// GET); else they are copied in slot order as they arrive.
	sorted := total <= orDefault(s.PackBufferBytes, DefaultPackBufferBytes)
	// The packs' keys carry the plan's digest: a plan that differs (its
	// decisions, or its layout's configuration) never writes another's.
	run.Digest = planDigest(run, ids, maxBytes, sorted, orDefault(s.MergeBelowBytes, DefaultMergeBelowBytes), orDefault(s.MaxObjectSpan, DefaultMaxObjectSpan))
	var n uint64 // the current pack: run.FirstSlot + n
	var buf []byte
	var copied int64 // the packed segments' bytes copied into packs so far
	written := 0
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		key := format.PackKey(c.Star, c.Class.String(), run.Epoch, run.FirstSlot, run.EndSlot, run.Digest, run.FirstSlot+n)
		err := s.put(ctx, key, buf)
		s.bufs().put(buf) // the put returned: buf was lent, not given
		buf = nil
		if err != nil {
			return fmt.Errorf("pack %s: %w", key, err)
		}
		written++
		return nil
	}
	// add copies one segment into the current pack (starting the next one
	// when it would overflow) and lists it in entry i.
	add := func(i int, g format.PassSegment, seg []byte) error {
		if len(buf) > 0 && int64(len(buf)+len(seg)) > maxBytes && run.FirstSlot+n+1 < run.EndSlot {
			if err := flush(); err != nil {
				return err
			}
			n++
		}
		if buf == nil { // a new pack: sized for what is left, up to maxBytes (no regrowth)
			buf = s.bufs().get(int(max(min(maxBytes, total-copied), int64(len(seg)))))
		}
		e := &entries[i]
		e.Segments = append(e.Segments, format.PassSegment{Slot: run.FirstSlot + n, FirstSeq: g.FirstSeq, Count: g.Count,
			Offset: uint32(len(buf)), Length: g.Length, CRC: g.CRC})
		s.cpuBegin()
		buf = append(buf, seg...)
		s.cpuEnd(len(seg))
		copied += int64(len(seg))
		return nil
	}
	got := map[[2]uint64][]byte{} // sorted: (slot, offset) -> segment
	for i, slot := range slots {
		var f fetched
		select {
		case f = <-results[i]:
		case <-ctx.Done():
			return nil, written, ctx.Err()
		}
		<-sem
		if f.err != nil {
			return nil, written, f.err
		}
		for _, g := range bySlot[slot] {
			seg := f.body[int64(g.seg.Offset)-f.off : int64(g.seg.Offset)-f.off+int64(g.seg.Length)]
			if sorted {
				got[[2]uint64{slot, uint64(g.seg.Offset)}] = seg
				continue
			}
			if err := add(g.entry, g.seg, seg); err != nil {
				return nil, written, err
			}
		}
	}
	if sorted {
		for i := range entries {
			for _, g := range src[i] {
				if err := add(i, g, got[[2]uint64{g.Slot, uint64(g.Offset)}]); err != nil {
					return nil, written, err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return nil, written, err
	}
	return entries, written, nil
}

// planDigest is the digest of a run's plan (format.PassIndex.Digest,
// design 014 "One commit point per step"): of everything the step's
// outcome depends on but the run's slots (in their keys) and the stored
// refs: its decisions (each marker's stream and seqs, in run, and the
// packed streams ids, in order), its layout's configuration (maxBytes,
// the order) and its flushes' (mergeBelow and span, Settler's
// MergeBelowBytes and MaxObjectSpan, which decide where a flush's refs
// end: settleGroups). Two plans of one run that would lay out other
// packs or flush otherwise get other digests (but for a CRC-32C
// collision), so a plan's packs are a function of their keys, a dead
// plan's never collide with a live one's, and a run names the flush
// settings it was planned with. Never 0 (a run without a digest).
func planDigest(run *format.PassIndex, packed []format.StreamID, maxBytes int64, sorted bool, mergeBelow int64, span time.Duration) uint32 {
	b := make([]byte, 0, 48+len(run.Streams)*32+len(packed)*16)
	b = append(b, "plan"...)
	b = binary.BigEndian.AppendUint64(b, run.EndSlot)
	b = binary.BigEndian.AppendUint64(b, uint64(maxBytes))
	if sorted {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(max(mergeBelow, -1))) // < 0: never merges
	b = binary.BigEndian.AppendUint64(b, uint64(max(span.Milliseconds(), -1)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(run.Streams)))
	for i := range run.Streams {
		m := &run.Streams[i]
		b = append(b, m.Stream[:]...)
		b = binary.BigEndian.AppendUint64(b, m.FirstSeq)
		b = binary.BigEndian.AppendUint64(b, m.LastSeq)
	}
	for _, id := range packed {
		b = append(b, id[:]...)
	}
	return nonZero(format.CRC(b))
}

// mergeDigest is a merged run's digest (format.PassIndex.Digest): its
// packs' bytes depend on its group (the level-1 runs its key's slots
// name, immutable) and on maxBytes, the pack size its layout uses.
func mergeDigest(maxBytes int64) uint32 {
	return nonZero(format.CRC(binary.BigEndian.AppendUint64([]byte("merged"), uint64(maxBytes))))
}

func nonZero(d uint32) uint32 {
	if d == 0 {
		return 1
	}
	return d
}
