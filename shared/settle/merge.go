package settle

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// DefaultFanout is how many consecutive level-1 runs settle merges into
// one merged run (design 014, level 2): an hour of one-minute steps.
const DefaultFanout = 60

// mergeChunk bounds one ranged GET of a level-1 pack by a merge (and so
// the merge's input memory: Fanout x 2 x mergeChunk, with the read
// ahead). A variable for tests (small chunks exercise the read ahead).
var mergeChunk int64 = 1 << 20

// merge runs one merge step of chain c (design 014, "Level 2 as built"):
// from a = the first level-1 run at or after max(flushed, merged) (the
// next epoch's first when that is an epoch's cut), when the level-1 runs
// from a hold a complete group (Fanout runs of a's epoch, or fewer ended
// by a run of a later epoch), it writes the merged run at a (or adopts
// the one stored there) and moves the merged cursor to its end. It reports
// whether it merged. A merged run is determined by a (its inputs are
// immutable runs), so racing copies write the same bytes; a lost cursor
// move is fine.
func (s *Settler) merge(ctx context.Context, c metastore.ChainID, res *Result) (bool, error) {
	fanout := orDefault(s.Fanout, DefaultFanout)
	if fanout < 0 {
		return false, nil
	}
	s.initWindow()
	h, err := s.Meta.GetHead(ctx, c)
	if err != nil {
		return false, fmt.Errorf("merge: %w", err)
	}
	// Runs start where the chain's indexed passes begin (design 014,
	// "Switching a live chain"): nothing to merge in refs mode.
	indexed, err := s.window.IndexedFrom(ctx, c, h)
	if err != nil || indexed.IsZero() {
		return false, err
	}
	a := h.Flushed
	for _, b := range []metastore.Cursor{h.Merged, indexed} {
		if a.Less(b) {
			a = b
		}
	}
	if !a.Less(h.Settled) {
		return false, nil
	}
	runs, err := s.window.Runs(ctx, c, a, h.Settled)
	if err != nil {
		return false, fmt.Errorf("merge: level-1 runs %s-%s: %w", a, h.Settled, err)
	}
	if len(runs) == 0 {
		return false, nil
	}
	// The group starts at the first run from a: at a, or, when a is an
	// epoch's end (the cut), at the next epoch's first run.
	a = metastore.Cursor{Epoch: runs[0].Epoch, Slot: runs[0].FirstSlot}
	k := 0
	for k < len(runs) && k < fanout && runs[k].Epoch == a.Epoch {
		k++
	}
	if k < fanout && k == len(runs) {
		return false, nil // not complete yet
	}
	group := runs[:k]
	m, err := s.window.MergedRun(ctx, c, a)
	switch {
	case err == nil: // a copy wrote it: adopt it, whatever its end
	case !errors.Is(err, objstore.ErrNotFound):
		return false, fmt.Errorf("merge: %w", err)
	default:
		if m, err = s.makeMerged(ctx, c, group, res); err != nil {
			return false, fmt.Errorf("merge at %s: %w", a, err)
		}
	}
	end := metastore.Cursor{Epoch: m.Epoch, Slot: m.EndSlot}
	if h.Merged.Less(end) {
		if err := s.Meta.AdvanceCursor(ctx, c, metastore.Merged, h.Merged, end); err != nil && !errors.Is(err, metastore.ErrConflict) {
			return false, fmt.Errorf("merge: advance merged: %w", err)
		}
		// The kept unflushed state follows (state.go): the next step's
		// head, if no copy moved it, has Merged at end.
		if cs := s.takeState(c, stateKey{flushed: h.Flushed, merged: h.Merged, settled: h.Settled}); cs != nil && cs.remapMerged(m) {
			s.putState(c, cs)
		}
	}
	res.Merges++
	s.window.PruneMerged(c, end)
	return true, nil
}

// mergedStream is one stream's resolved entries of a group of runs.
type mergedStream struct {
	marker *format.PassStream   // its last marker in the group
	ents   []*format.PassStream // its packed entries after it
	runs   []*format.PassIndex  // the run of each
}

// makeMerged builds the merged run of group (consecutive level-1 runs of
// one epoch, from group[0].FirstSlot): per stream its last marker, then
// one packed entry holding all its packed entries after that marker as
// one segment, the segments copied into the merged run's packs in stream
// order; writes the packs and the run index (PutIfAbsent; a stored one
// is adopted) and returns it.
func (s *Settler) makeMerged(ctx context.Context, c metastore.ChainID, group []*format.PassIndex, res *Result) (*format.PassIndex, error) {
	first, last := group[0], group[len(group)-1]
	run := &format.PassIndex{Epoch: first.Epoch, FirstSlot: first.FirstSlot, EndSlot: last.EndSlot, Merged: true}
	// Resolve, in stream id order: each run's entries are sorted, so a
	// k-way walk over the runs' entry arrays.
	pos := make([]int, len(group))
	streams := make([]format.StreamID, 0, len(group[len(group)-1].Streams))
	byID := make(map[format.StreamID]*mergedStream, len(group[len(group)-1].Streams))
	for {
		var next *format.StreamID
		for ri, r := range group {
			if pos[ri] < len(r.Streams) {
				id := &r.Streams[pos[ri]].Stream
				if next == nil || string(id[:]) < string(next[:]) {
					next = id
				}
			}
		}
		if next == nil {
			break
		}
		id := *next
		ms := &mergedStream{}
		for ri, r := range group {
			for pos[ri] < len(r.Streams) && r.Streams[pos[ri]].Stream == id {
				e := &r.Streams[pos[ri]]
				pos[ri]++
				if e.Marker() {
					ms.marker, ms.ents, ms.runs = e, nil, nil
					continue
				}
				ms.ents, ms.runs = append(ms.ents, e), append(ms.runs, r)
			}
		}
		streams = append(streams, id)
		byID[id] = ms
	}
	// The layout (mergedLayout): where each stream's one segment goes, a
	// function of the group's indexes alone. Packs a copy or an earlier
	// invocation already stored (a prefix: every copy writes them in
	// order) are read back for their segments' CRCs instead of being
	// rebuilt, so a merge interrupted at any point resumes where it
	// stopped (issue 17, "The hourly step at 1,000,000 streams").
	maxBytes := orDefault(s.MaxObjectBytes, DefaultMaxObjectBytes)
	lay := layoutMerged(streams, byID, run, maxBytes)
	run.Streams = make([]format.PassStream, 0, lay.entries)
	done, stored, err := s.storedMergedPacks(ctx, c, run, streams, byID, lay)
	if err != nil {
		return nil, err
	}
	in := make([]*packReader, len(group))
	for i, r := range group {
		in[i] = newPackReader(s.Settled, c, r)
	}
	defer func() {
		for _, p := range in {
			p.close()
		}
	}()
	var (
		n   uint64 // the pack being filled
		buf []byte
	)
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		if int64(len(buf)) != lay.packLen[n] {
			return fmt.Errorf("merged pack %d: %d bytes, laid out %d: %w", n, len(buf), lay.packLen[n], ErrMismatch)
		}
		key := format.MergedPackKey(c.Star, c.Class.String(), run.Epoch, run.FirstSlot, run.EndSlot, run.FirstSlot+n)
		if err := s.put(ctx, key, buf); err != nil {
			return fmt.Errorf("merged pack %s: %w", key, err)
		}
		buf = nil
		res.Packs++
		return nil
	}
	for si, id := range streams {
		ms := byID[id]
		if ms.marker != nil {
			m := *ms.marker
			run.Streams = append(run.Streams, m)
		}
		if len(ms.ents) == 0 {
			continue
		}
		e := format.PassStream{Stream: id, FirstSeq: ms.ents[0].FirstSeq, LastSeq: ms.ents[len(ms.ents)-1].LastSeq,
			FirstTsMs: ms.ents[0].FirstTsMs, LastTsMs: ms.ents[len(ms.ents)-1].LastTsMs}
		var marks []metastore.ProducerMark
		for _, pe := range ms.ents {
			e.Bytes += pe.Bytes
			for _, m := range pe.Marks {
				marks = append(marks, metastore.ProducerMark{Producer: m.Producer, BatchSeq: m.BatchSeq, FirstSeq: m.FirstSeq, LastSeq: m.LastSeq})
			}
			if pe.Commands != nil {
				cs := *pe.Commands
				e.Commands = &cs
			}
		}
		if len(marks) > 0 {
			for _, m := range metastore.TrimMarks(marks) {
				e.Marks = append(e.Marks, format.PassMark{Producer: m.Producer, BatchSeq: m.BatchSeq, FirstSeq: m.FirstSeq, LastSeq: m.LastSeq})
			}
		}
		at := lay.at[si]
		if at.pack < done {
			// In a pack already stored: its segment as stored (checked).
			e.Segments = []format.PassSegment{stored[si]}
			run.Streams = append(run.Streams, e)
			continue
		}
		var recs [][]byte
		var count uint64
		next := e.FirstSeq
		for i, pe := range ms.ents {
			for _, g := range pe.Segments {
				seg, err := in[indexOf(group, ms.runs[i])].read(ctx, g)
				if err != nil {
					return nil, fmt.Errorf("stream %s: %w", id, err)
				}
				info, body, err := format.ParseSegment(seg)
				if err != nil {
					return nil, fmt.Errorf("stream %s: segment at seq %d of run %d: %w", id, g.FirstSeq, ms.runs[i].FirstSlot, err)
				}
				if info.Stream != id || info.FirstSeq != next || info.Count != g.Count {
					return nil, fmt.Errorf("stream %s: segment of %s at seq %d+%d where seq %d was due: %w", id, info.Stream, info.FirstSeq, info.Count, next, ErrMismatch)
				}
				next += uint64(info.Count)
				count += uint64(info.Count)
				recs = append(recs, body)
			}
		}
		if next-1 != e.LastSeq || count > uint64(^uint32(0)) || count != at.count {
			return nil, fmt.Errorf("stream %s: segments end at seq %d, entries at %d (%d records, %d laid out): %w", id, next-1, e.LastSeq, count, at.count, ErrMismatch)
		}
		if at.pack != n {
			if err := flush(); err != nil {
				return nil, err
			}
			n = at.pack
		}
		if buf == nil {
			buf = make([]byte, 0, lay.packLen[n])
		}
		start := len(buf)
		if int64(start) != at.off {
			return nil, fmt.Errorf("stream %s: at %d of merged pack %d, laid out at %d: %w", id, start, n, at.off, ErrMismatch)
		}
		var err error
		if buf, err = format.AppendSegment(buf, format.SegmentInfo{Stream: id, FirstSeq: e.FirstSeq, Count: uint32(count)}, recs...); err != nil {
			return nil, fmt.Errorf("stream %s: %w", id, err)
		}
		seg := buf[start:]
		e.Segments = []format.PassSegment{{Slot: run.FirstSlot + n, FirstSeq: e.FirstSeq, Count: uint32(count),
			Offset: uint32(start), Length: uint32(len(seg)), CRC: crcOf(seg)}}
		run.Streams = append(run.Streams, e)
		res.MergedStreams++
	}
	if err := flush(); err != nil {
		return nil, err
	}
	obj, err := format.AppendPassIndex(nil, *run)
	if err != nil {
		return nil, fmt.Errorf("encode the merged run: %w", err)
	}
	key := format.MergedRunKey(c.Star, c.Class.String(), run.Epoch, run.FirstSlot)
	err = s.Settled.PutIfAbsent(ctx, key, obj)
	switch {
	case err == nil:
		s.window.AddMerged(c, run)
		return run, nil
	case !errors.Is(err, objstore.ErrExists) && !errors.Is(err, objstore.ErrAmbiguous):
		return nil, fmt.Errorf("write the merged run %s: %w", key, err)
	}
	// A copy wrote it first (or our write's outcome is unknown): the
	// stored one is the merged run, whatever it says.
	got, err := s.window.MergedRun(ctx, c, metastore.Cursor{Epoch: run.Epoch, Slot: run.FirstSlot})
	if err != nil {
		return nil, fmt.Errorf("read back the merged run %s: %w", key, err)
	}
	return got, nil
}

func indexOf(group []*format.PassIndex, r *format.PassIndex) int {
	for i, g := range group {
		if g == r {
			return i
		}
	}
	panic("settle: merge: run not in its group")
}

// crcOf is a segment's stored CRC (its last 4 bytes).
func crcOf(seg []byte) uint32 {
	n := len(seg)
	return uint32(seg[n-4])<<24 | uint32(seg[n-3])<<16 | uint32(seg[n-2])<<8 | uint32(seg[n-1])
}

// packReader reads one level-1 run's segments from its packs in ranged
// GETs of up to mergeChunk: reads in pack order (a run packed in stream
// order, read in stream order) fetch each byte once. Each fetch starts
// the next chunk of the pack ahead (one in flight per input run, so a
// merge keeps up to Fanout GETs in flight while it copies).
type packReader struct {
	b      objstore.Bucket
	c      metastore.ChainID
	r      *format.PassIndex
	extent map[uint64]int64 // per pack, the end of its last segment
	slot   uint64
	lo     int64
	body   []byte
	ahead  *chunkFetch // the next chunk, being fetched
}

// chunkFetch is one ranged GET of a pack in flight.
type chunkFetch struct {
	slot uint64
	lo   int64
	done chan struct{}
	body []byte
	err  error
}

func newPackReader(b objstore.Bucket, c metastore.ChainID, r *format.PassIndex) *packReader {
	p := &packReader{b: b, c: c, r: r, extent: map[uint64]int64{}}
	for i := range r.Streams {
		for _, g := range r.Streams[i].Segments {
			p.extent[g.Slot] = max(p.extent[g.Slot], int64(g.Offset)+int64(g.Length))
		}
	}
	return p
}

// fetch starts a GET of [lo, lo+n) of pack slot.
func (p *packReader) fetch(ctx context.Context, slot uint64, lo, n int64) *chunkFetch {
	f := &chunkFetch{slot: slot, lo: lo, done: make(chan struct{})}
	key := format.PackKey(p.c.Star, p.c.Class.String(), p.r.Epoch, p.r.FirstSlot, p.r.EndSlot, slot)
	go func() {
		defer close(f.done)
		f.body, f.err = p.b.Get(ctx, key, lo, n)
		if f.err == nil && int64(len(f.body)) != n {
			f.err = fmt.Errorf("%d of %d bytes at %d: %w", len(f.body), n, lo, ErrMismatch)
		}
		if f.err != nil {
			f.err = fmt.Errorf("read pack %s: %w", key, f.err)
		}
	}()
	return f
}

// read returns segment g of the run (checked by the caller).
func (p *packReader) read(ctx context.Context, g format.PassSegment) ([]byte, error) {
	off, n := int64(g.Offset), int64(g.Length)
	if p.body == nil || g.Slot != p.slot || off < p.lo || off+n > p.lo+int64(len(p.body)) {
		f := p.ahead
		p.ahead = nil
		if f != nil {
			<-f.done
		}
		ok := f != nil && f.err == nil && f.slot == g.Slot
		var body []byte
		var lo int64
		switch {
		case ok && off >= f.lo && off+n <= f.lo+int64(len(f.body)): // inside the chunk read ahead
			body, lo = f.body, f.lo
		case ok && p.body != nil && p.slot == g.Slot && f.lo == p.lo+int64(len(p.body)) && off >= p.lo && off+n <= f.lo+int64(len(f.body)):
			// Across the end of the chunk and into the one read ahead.
			body, lo = append(slices.Clone(p.body[off-p.lo:]), f.body...), off
		default: // a jump, or the first read: fetch from here
			f = p.fetch(ctx, g.Slot, off, min(max(n, mergeChunk), p.extent[g.Slot]-off))
			<-f.done
			if f.err != nil {
				p.body = nil
				return nil, f.err
			}
			body, lo = f.body, f.lo
		}
		p.slot, p.lo, p.body = g.Slot, lo, body
		if next := p.lo + int64(len(p.body)); next < p.extent[p.slot] {
			p.ahead = p.fetch(ctx, p.slot, next, min(mergeChunk, p.extent[p.slot]-next))
		}
	}
	return p.body[off-p.lo : off-p.lo+n], nil
}

// close waits for the read ahead, if any (its result is dropped).
func (p *packReader) close() {
	if p.ahead != nil {
		<-p.ahead.done
		p.ahead = nil
	}
}
