package settle

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// A merge that resumes (issue 17, "The hourly step at 1,000,000
// streams"). A merged run's packs are a function of its group's indexes
// alone: each stream's one segment is its records re-encoded, and a
// segment's length is its records' length plus a fixed overhead, known
// from the input entries' segment lengths without reading a pack. So the
// layout (which pack, at which offset, each stream's segment goes) is
// computed as the merge goes, and a merge that finds packs already
// stored (by a copy, or by an earlier invocation that ran out of time
// before the run index) adopts them: it reads each back once, checks
// every segment the layout puts in it (stream, first seq, count, CRC)
// and its length, and takes the segments' locations from it; it builds
// only the packs that are missing. Every copy writes the packs in order,
// so the packs stored are a prefix; the first one missing ends the
// adoption (a later one stored meanwhile is rewritten with identical
// bytes: PutDetermined). A merge interrupted at any point so makes
// progress: each invocation that writes a pack shortens the next one,
// and the merged run's bytes are those of a merge never interrupted
// (TestMergeResumesAcrossInvocations).

// mergedStream is one stream's resolved entries of a group of runs.
type mergedStream struct {
	marker *format.PassStream   // its last marker in the group
	ents   []*format.PassStream // its packed entries after it
	runs   []int                // the input run of each
}

// makeMerged builds the merged run of group (consecutive level-1 runs of
// one epoch, from group[0].first): per stream its last marker, then one
// packed entry holding all its packed entries after that marker as one
// segment, the segments copied into the merged run's packs in stream
// order (mergestream.go: the inputs read by range, resumed from the packs
// already stored: above); writes the packs and the run index
// (PutIfAbsent; a stored one is adopted) and returns it.
func (s *Settler) makeMerged(ctx context.Context, c metastore.ChainID, group []groupRun, res *Result) (*format.PassIndex, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	first, last := group[0], group[len(group)-1]
	run := &format.PassIndex{Epoch: first.epoch, FirstSlot: first.first, EndSlot: last.end, Merged: true}
	curs := make([]*runCursor, 0, len(group))
	in := make([]*packReader, len(group))
	defer func() {
		cancel()
		for _, rc := range curs {
			rc.close()
		}
		for _, p := range in {
			if p != nil {
				p.close()
			}
		}
	}()
	for i, g := range group {
		rc, err := openRun(ctx, s.Settled, c, g)
		if err != nil {
			return nil, err
		}
		curs = append(curs, rc)
		in[i] = newPackReader(s.Settled, c, g)
	}
	out := &mergedOut{s: s, c: c, run: run, res: res, maxBytes: orDefault(s.MaxObjectBytes, DefaultMaxObjectBytes), probing: true}
	// The packs' keys carry the digest of the merge's configuration: a
	// merge resumed with another MaxObjectBytes (a deploy between two
	// invocations) lays out other packs, at other keys.
	run.Digest = mergeDigest(out.maxBytes)
	for {
		// The next stream: the least id of the inputs' next entries.
		var id format.StreamID
		found := false
		for _, rc := range curs {
			e, err := rc.peek()
			if err != nil {
				return nil, err
			}
			if e != nil && (!found || bytes.Compare(e.Stream[:], id[:]) < 0) {
				id, found = e.Stream, true
			}
		}
		if !found {
			break
		}
		ms := &mergedStream{}
		for ri, rc := range curs {
			for {
				e, err := rc.peek()
				if err != nil {
					return nil, err
				}
				if e == nil || e.Stream != id {
					break
				}
				rc.pos++
				if e.Marker() {
					ms.marker, ms.ents, ms.runs = e, nil, nil
					continue
				}
				ms.ents, ms.runs = append(ms.ents, e), append(ms.runs, ri)
			}
		}
		if err := out.add(ctx, id, ms, in); err != nil {
			return nil, err
		}
	}
	if err := out.finish(ctx); err != nil {
		return nil, err
	}
	key := format.MergedRunKey(c.Star, c.Class.String(), run.Epoch, run.FirstSlot)
	if written, err := s.putRun(ctx, key, run); err != nil {
		return nil, err
	} else if written {
		s.window.AddMerged(c, run)
		return run, nil
	}
	// A copy wrote it first (or our write's outcome is unknown): the
	// stored one is the merged run, whatever it says.
	got, err := s.window.MergedRun(ctx, c, metastore.Cursor{Epoch: run.Epoch, Slot: run.FirstSlot})
	if err != nil {
		return nil, fmt.Errorf("read back the merged run %s: %w", key, err)
	}
	return got, nil
}

// mergedOut lays out and fills the merged run's packs, stream by stream:
// back to back, a new pack when the next segment would take a non-empty
// pack past maxBytes, except that the run's last possible pack
// (FirstSlot+n+1 == EndSlot) takes what is left. While the packs so far
// were found stored (probing), each pack is first looked for and, if
// stored, adopted (checked) instead of built.
type mergedOut struct {
	s        *Settler
	c        metastore.ChainID
	run      *format.PassIndex
	res      *Result
	maxBytes int64
	started  bool
	n        uint64 // the pack being laid out
	fill     int64  // its length so far
	probing  bool   // every pack so far was found stored
	stored   []byte // pack n as stored, when adopted
	buf      []byte // pack n being built, when not
}

func (o *mergedOut) key(n uint64) string {
	return format.MergedPackKey(o.c.Star, o.c.Class.String(), o.run.Epoch, o.run.FirstSlot, o.run.EndSlot, o.run.Digest, o.run.FirstSlot+n)
}

// start begins pack n: adopts it if the packs so far were stored and it
// is too.
func (o *mergedOut) start(ctx context.Context, n uint64) error {
	o.n, o.fill, o.stored, o.buf = n, 0, nil, nil
	if !o.probing {
		return nil
	}
	body, err := o.s.Settled.Get(ctx, o.key(n), 0, -1)
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		o.probing = false
		return nil
	case err != nil:
		return fmt.Errorf("read back merged pack %s: %w", o.key(n), err)
	}
	o.stored = body
	return nil
}

// finish ends pack n: checks the adopted one's length, or writes the one
// built.
func (o *mergedOut) finish(ctx context.Context) error {
	if !o.started {
		return nil
	}
	if o.stored != nil {
		if int64(len(o.stored)) != o.fill {
			return fmt.Errorf("merged pack %s: %d bytes stored, laid out %d: %w", o.key(o.n), len(o.stored), o.fill, ErrForeign)
		}
		o.stored = nil
		return nil
	}
	if len(o.buf) == 0 {
		return nil
	}
	err := o.s.put(ctx, o.key(o.n), o.buf)
	o.s.bufs().put(o.buf) // the put returned: the buffer was lent, not given
	o.buf = nil
	if err != nil {
		return fmt.Errorf("merged pack %s: %w", o.key(o.n), err)
	}
	o.res.Packs++
	return nil
}

// add appends stream id's merged entries: its last marker, then one
// packed entry for its packed entries after it.
func (o *mergedOut) add(ctx context.Context, id format.StreamID, ms *mergedStream, in []*packReader) error {
	run := o.run
	if ms.marker != nil {
		run.Streams = append(run.Streams, *ms.marker)
	}
	if len(ms.ents) == 0 {
		return nil
	}
	e := format.PassStream{Stream: id, FirstSeq: ms.ents[0].FirstSeq, LastSeq: ms.ents[len(ms.ents)-1].LastSeq,
		FirstTsMs: ms.ents[0].FirstTsMs, LastTsMs: ms.ents[len(ms.ents)-1].LastTsMs}
	var marks []metastore.ProducerMark
	var recLen int64
	var count uint64
	for _, pe := range ms.ents {
		e.Bytes += pe.Bytes
		for _, m := range pe.Marks {
			marks = append(marks, metastore.ProducerMark{Producer: m.Producer, BatchSeq: m.BatchSeq, FirstSeq: m.FirstSeq, LastSeq: m.LastSeq})
		}
		if pe.Commands != nil {
			cs := *pe.Commands
			e.Commands = &cs
		}
		for _, g := range pe.Segments {
			recLen += int64(g.Length) - int64(format.SegmentSize(0))
			count += uint64(g.Count)
		}
	}
	if len(marks) > 0 {
		for _, m := range metastore.TrimMarks(marks) {
			e.Marks = append(e.Marks, format.PassMark{Producer: m.Producer, BatchSeq: m.BatchSeq, FirstSeq: m.FirstSeq, LastSeq: m.LastSeq})
		}
	}
	e.Carried, e.CarriedBelow = lastPassCarried(ms.ents) // the newest carried table (ADR 0062)
	if count > uint64(^uint32(0)) {
		return fmt.Errorf("stream %s: %d records in one segment: %w", id, count, format.ErrTooLong)
	}
	// Its place.
	size := int64(format.SegmentSize(0)) + recLen
	switch {
	case !o.started:
		o.started = true
		if err := o.start(ctx, 0); err != nil {
			return err
		}
	case o.fill > 0 && o.fill+size > o.maxBytes && run.FirstSlot+o.n+1 < run.EndSlot:
		if err := o.finish(ctx); err != nil {
			return err
		}
		if err := o.start(ctx, o.n+1); err != nil {
			return err
		}
	}
	at := o.fill
	o.fill += size
	if o.stored != nil {
		// Adopted: the stored segment, checked.
		if o.fill > int64(len(o.stored)) {
			return fmt.Errorf("merged pack %s: %d bytes stored, stream %s laid out to %d: %w", o.key(o.n), len(o.stored), id, o.fill, ErrForeign)
		}
		seg := o.stored[at:o.fill]
		info, _, err := o.s.parse(seg)
		if err != nil {
			return fmt.Errorf("merged pack %s at %d: %w: %w", o.key(o.n), at, ErrForeign, err)
		}
		if info.Stream != id || info.FirstSeq != e.FirstSeq || uint64(info.Count) != count {
			return fmt.Errorf("merged pack %s at %d: segment of %s at seq %d+%d where stream %s seq %d+%d is laid out: %w",
				o.key(o.n), at, info.Stream, info.FirstSeq, info.Count, id, e.FirstSeq, count, ErrForeign)
		}
		e.Segments = []format.PassSegment{{Slot: run.FirstSlot + o.n, FirstSeq: e.FirstSeq, Count: uint32(count),
			Offset: uint32(at), Length: uint32(size), CRC: crcOf(seg)}}
		run.Streams = append(run.Streams, e)
		return nil
	}
	// Built: the records read from the inputs' packs, re-encoded.
	var recs [][]byte
	next := e.FirstSeq
	var got uint64
	for i, pe := range ms.ents {
		for _, g := range pe.Segments {
			seg, err := in[ms.runs[i]].read(ctx, g)
			if err != nil {
				return fmt.Errorf("stream %s: %w", id, err)
			}
			info, body, err := o.s.parse(seg)
			if err != nil {
				return fmt.Errorf("stream %s: segment at seq %d of run %d: %w", id, g.FirstSeq, in[ms.runs[i]].g.first, err)
			}
			if info.Stream != id || info.FirstSeq != next || info.Count != g.Count {
				return fmt.Errorf("stream %s: segment of %s at seq %d+%d where seq %d was due: %w", id, info.Stream, info.FirstSeq, info.Count, next, ErrMismatch)
			}
			next += uint64(info.Count)
			got += uint64(info.Count)
			recs = append(recs, body)
		}
	}
	if next-1 != e.LastSeq || got != count {
		return fmt.Errorf("stream %s: segments end at seq %d, entries at %d (%d records, %d in the entries): %w", id, next-1, e.LastSeq, got, count, ErrMismatch)
	}
	if o.buf == nil {
		o.buf = o.s.bufs().get(int(max(min(o.maxBytes, 1<<20), size)))
	}
	if int64(len(o.buf)) != at {
		return fmt.Errorf("stream %s: at %d of merged pack %d, laid out at %d: %w", id, len(o.buf), o.n, at, ErrMismatch)
	}
	var err error
	o.s.cpuBegin()
	o.buf, err = format.AppendSegment(o.buf, format.SegmentInfo{Stream: id, FirstSeq: e.FirstSeq, Count: uint32(count)}, recs...)
	o.s.cpuEnd(int(size))
	if err != nil {
		return fmt.Errorf("stream %s: %w", id, err)
	}
	seg := o.buf[at:]
	if int64(len(seg)) != size {
		return fmt.Errorf("stream %s: a segment of %d bytes, laid out %d: %w", id, len(seg), size, ErrMismatch)
	}
	e.Segments = []format.PassSegment{{Slot: run.FirstSlot + o.n, FirstSeq: e.FirstSeq, Count: uint32(count),
		Offset: uint32(at), Length: uint32(size), CRC: crcOf(seg)}}
	run.Streams = append(run.Streams, e)
	o.res.MergedStreams++
	return nil
}
