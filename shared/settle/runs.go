package settle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// Flush defaults (design 014, level 1).
const (
	DefaultFlushBytes = 4 << 20
	DefaultFlushAge   = 24 * time.Hour
)

// unflushed is one stream's packed entries in the live runs after its
// last marker: what a flush of it would write behind a ref.
type unflushed struct {
	parts  []metastore.Ref // settled locations in packs, in seq order
	oldest int             // index in the live runs of the run of parts[0]
	bytes  int64
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
	s.windowOnce.Do(func() { s.window = &absorb.IndexWindow{Meta: s.Meta, Bucket: s.Settled} })
	set, err := s.Sets.For(c)
	if err != nil {
		return st, h.Flushed, err
	}
	runs, err := s.window.Runs(ctx, c, h.Flushed, st.From)
	if err != nil {
		return st, h.Flushed, fmt.Errorf("live runs %s-%s: %w", h.Flushed, st.From, err)
	}
	state, runTimes := unflushedOf(c, runs)
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
		return st, h.Flushed, fmt.Errorf("no pass from %s to %s: %w", st.From, end, absorb.ErrWindow)
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
			sp.refs = append(sp.refs, absorb.PassRef(c.Star, p.Epoch, ps))
			sp.raw = append(sp.raw, ps)
		}
	}
	res.Streams = len(step)
	if plan == nil {
		if plan, err = s.makePlan(ctx, set, c, st.From, passes, runs, runTimes, state, step, res); err != nil {
			return st, h.Flushed, err
		}
	} else if plan.EndSlot != passes[len(passes)-1].EndSlot {
		return st, h.Flushed, fmt.Errorf("run at %s ends at %d, its passes at %d: %w", st.From, plan.EndSlot, passes[len(passes)-1].EndSlot, absorb.ErrWindow)
	}
	// The flushes: one settled object (or a few) and one ref per marker.
	flushed := map[format.StreamID]bool{}
	for i := range plan.Streams {
		m := &plan.Streams[i]
		if !m.Marker() {
			res.Packed++
			continue
		}
		flushed[m.Stream] = true
		var parts []metastore.Ref
		if u := state[m.Stream]; u != nil {
			parts = append(parts, u.parts...)
		}
		if sp := step[m.Stream]; sp != nil {
			parts = append(parts, sp.refs...)
		}
		parts = slices.DeleteFunc(parts, func(r metastore.Ref) bool { return r.LastSeq < m.FirstSeq || r.FirstSeq > m.LastSeq })
		if len(parts) == 0 || parts[0].FirstSeq != m.FirstSeq || parts[len(parts)-1].LastSeq != m.LastSeq {
			return st, h.Flushed, fmt.Errorf("stream %s: the marker %d-%d of the run at %s is not its unflushed parts: %w", m.Stream, m.FirstSeq, m.LastSeq, st.From, ErrMismatch)
		}
		objs, merged, err := s.streamParts(ctx, set, c, st.From, m.Stream, parts)
		if err != nil {
			return st, h.Flushed, fmt.Errorf("flush stream %s: %w", m.Stream, err)
		}
		res.Flushes++
		res.Objects += objs
		res.Merged += merged
	}
	// Flushed after the plan: the first run holding an entry of a stream
	// not flushed since, else the plan's end.
	to := metastore.Cursor{Epoch: plan.Epoch, Slot: plan.EndSlot}
	newFlushed := to
	for id, u := range state {
		if at := (metastore.Cursor{Epoch: runs[u.oldest].Epoch, Slot: runs[u.oldest].FirstSlot}); !flushed[id] && at.Less(newFlushed) {
			newFlushed = at
		}
	}
	if res.Packed > 0 && st.From.Less(newFlushed) {
		newFlushed = st.From
	}
	st.End, st.To = plan.EndSlot, to
	s.window.Prune(c, to)
	s.window.PruneRuns(c, newFlushed)
	return st, newFlushed, nil
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
				u = &unflushed{oldest: ri}
				state[e.Stream] = u
			}
			u.parts = append(u.parts, absorb.RunRef(c, r, e))
			u.bytes += e.Bytes
		}
	}
	return state, times
}

// makePlan decides the step's flushes, copies the other streams' segments
// into packs and writes the run index at `from` (PutIfAbsent); a run
// index already there (a copy racing) is adopted instead. The decision
// depends on the inputs only, never on the clock: a stream of the step is
// flushed when its unflushed bytes reach FlushBytes, and any stream is
// when its oldest unflushed entry's run is FlushAge older than the step's
// time (the latest record timestamp in the live runs and the passes).
func (s *Settler) makePlan(ctx context.Context, set chain.Set, c metastore.ChainID, from metastore.Cursor, passes []*format.PassIndex,
	runs []*format.PassIndex, runTimes []int64, state map[format.StreamID]*unflushed, step map[format.StreamID]*stepPart, res *Result) (*format.PassIndex, error) {
	flushBytes := orDefault(s.FlushBytes, DefaultFlushBytes)
	ageMs := orDefault(s.FlushAge, DefaultFlushAge).Milliseconds()
	var now int64
	for _, t := range runTimes {
		now = max(now, t)
	}
	for _, p := range passes {
		for i := range p.Streams {
			now = max(now, p.Streams[i].LastTsMs)
		}
	}
	ids := slices.Collect(maps.Keys(step))
	for id := range state {
		if step[id] == nil {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b format.StreamID) int { return bytes.Compare(a[:], b[:]) })
	plan := &format.PassIndex{Epoch: from.Epoch, FirstSlot: from.Slot, EndSlot: passes[len(passes)-1].EndSlot}
	pk := packer{s: s, set: set, c: c, run: plan, maxBytes: orDefault(s.MaxObjectBytes, DefaultMaxObjectBytes)}
	for _, id := range ids {
		u, sp := state[id], step[id]
		var b int64
		if u != nil {
			b = u.bytes
		}
		if sp != nil {
			b += sp.bytes()
		}
		oldest := now // the step's own parts are of the step's time
		if u != nil {
			oldest = runTimes[u.oldest]
		}
		if (sp != nil && b >= flushBytes) || now-oldest >= ageMs {
			var parts []metastore.Ref
			if u != nil {
				parts = append(parts, u.parts...)
			}
			if sp != nil {
				parts = append(parts, sp.refs...)
			}
			first, last := parts[0], parts[len(parts)-1]
			plan.Streams = append(plan.Streams, format.PassStream{Stream: id, FirstSeq: first.FirstSeq, LastSeq: last.LastSeq,
				FirstTsMs: first.FirstTsMs, LastTsMs: last.LastTsMs})
			continue
		}
		if sp == nil {
			continue
		}
		e, err := pk.add(ctx, id, sp)
		if err != nil {
			return nil, err
		}
		plan.Streams = append(plan.Streams, e)
	}
	if err := pk.flush(ctx); err != nil {
		return nil, err
	}
	res.Packs = pk.written
	obj, err := format.AppendPassIndex(nil, *plan)
	if err != nil {
		return nil, fmt.Errorf("encode the run at %s: %w", from, err)
	}
	key := format.RunIndexKey(c.Star, c.Class.String(), from.Epoch, from.Slot)
	err = s.Settled.PutIfAbsent(ctx, key, obj)
	switch {
	case err == nil:
		s.window.AddRun(c, plan)
		return plan, nil
	case !errors.Is(err, objstore.ErrExists) && !errors.Is(err, objstore.ErrAmbiguous):
		return nil, fmt.Errorf("write the run %s: %w", key, err)
	}
	// A copy wrote the run first (or our write's outcome is unknown): the
	// run stored is the plan, whatever it says.
	got, err := s.window.Run(ctx, c, from)
	if err != nil {
		return nil, fmt.Errorf("read back the run %s: %w", key, err)
	}
	if got.EndSlot != plan.EndSlot {
		return nil, fmt.Errorf("the run at %s stored ends at %d, this step's passes at %d: re-read: %w", from, got.EndSlot, plan.EndSlot, metastore.ErrConflict)
	}
	return got, nil
}

// packer copies streams' segments, back to back, into a run's packs of at
// most maxBytes each (the run's last possible pack, first slot + slots -
// 1, takes what is left), writing each pack as soon as it is full.
type packer struct {
	s        *Settler
	set      chain.Set
	c        metastore.ChainID
	run      *format.PassIndex
	maxBytes int64
	n        uint64 // the current pack: run.FirstSlot + n
	buf      []byte
	written  int
}

// add copies stream id's segments of the step into packs and returns its
// packed entry: the step's parts joined, segments located in packs.
func (p *packer) add(ctx context.Context, id format.StreamID, sp *stepPart) (format.PassStream, error) {
	first, last := sp.raw[0], sp.raw[len(sp.raw)-1]
	e := format.PassStream{Stream: id, FirstSeq: first.FirstSeq, LastSeq: last.LastSeq, FirstTsMs: first.FirstTsMs, LastTsMs: last.LastTsMs}
	var marks []format.PassMark
	for pi, ps := range sp.raw {
		e.Bytes += ps.Bytes
		marks = append(marks, ps.Marks...)
		if ps.Commands != nil {
			cs := *ps.Commands
			e.Commands = &cs
		}
		for gi, g := range ps.Segments {
			loc := sp.refs[pi].Locations[gi]
			seg, err := p.set.ReadRange(ctx, loc.Key, loc.Offset, loc.Length, checkSegment)
			if err != nil {
				return e, fmt.Errorf("stream %s: read %s: %w", id, loc.Key, err)
			}
			if len(p.buf) > 0 && int64(len(p.buf)+len(seg)) > p.maxBytes && p.run.FirstSlot+p.n+1 < p.run.EndSlot {
				if err := p.flush(ctx); err != nil {
					return e, err
				}
				p.n++
			}
			e.Segments = append(e.Segments, format.PassSegment{Slot: p.run.FirstSlot + p.n, FirstSeq: g.FirstSeq, Count: g.Count,
				Offset: uint32(len(p.buf)), Length: g.Length, CRC: g.CRC})
			p.buf = append(p.buf, seg...)
		}
	}
	if len(marks) > 0 {
		rm := make([]metastore.ProducerMark, len(marks))
		for i, m := range marks {
			rm[i] = metastore.ProducerMark{Producer: m.Producer, BatchSeq: m.BatchSeq, FirstSeq: m.FirstSeq, LastSeq: m.LastSeq}
		}
		for _, m := range metastore.TrimMarks(rm) {
			e.Marks = append(e.Marks, format.PassMark{Producer: m.Producer, BatchSeq: m.BatchSeq, FirstSeq: m.FirstSeq, LastSeq: m.LastSeq})
		}
	}
	return e, nil
}

// flush writes the current pack, if it holds anything.
func (p *packer) flush(ctx context.Context) error {
	if len(p.buf) == 0 {
		return nil
	}
	key := format.PackKey(p.c.Star, p.c.Class.String(), p.run.Epoch, p.run.FirstSlot, p.run.EndSlot, p.run.FirstSlot+p.n)
	if err := p.s.put(ctx, key, p.buf); err != nil {
		return fmt.Errorf("pack %s: %w", key, err)
	}
	p.buf = nil // the bucket may keep the slice it was given
	p.written++
	return nil
}
