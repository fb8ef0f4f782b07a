package settle

import (
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
// computed first (layoutMerged), and a merge that finds packs already
// stored (by a copy, or by an earlier invocation that ran out of time or
// memory before the run index) adopts them: it reads each back once,
// checks every segment the layout puts in it (stream, first seq, count,
// CRC) and takes its location from it, and builds only the packs that are
// missing. Every copy writes the packs in order, so the packs stored are
// a prefix; the first one missing ends the adoption (a later one stored
// meanwhile is rewritten with identical bytes: PutDetermined). A merge
// interrupted at any point so makes progress: each invocation that
// writes a pack shortens the next one, and the merged run's bytes are
// those of a merge never interrupted (TestMergeResumesAcrossInvocations).

// mergedAt is where a stream's one segment goes in the merged run.
type mergedAt struct {
	pack   uint64 // the pack's index n (slot FirstSlot+n)
	off    int64  // offset in the pack
	length int64  // the segment's length
	count  uint64 // its records
}

// mergedLayout is the merged run's packs, laid out.
type mergedLayout struct {
	at      []mergedAt // per stream of the merge's stream order (zero: no packed entry)
	packLen []int64    // each pack's length
	first   []int      // per pack, the index of its first stream
	entries int        // the merged run's entries (markers and packed)
}

// layoutMerged lays the merged run's segments out as makeMerged writes
// them: in stream order, back to back, a new pack when the next segment
// would take a non-empty pack past maxBytes, except that the run's last
// possible pack (FirstSlot+n+1 == EndSlot) takes what is left.
func layoutMerged(streams []format.StreamID, byID map[format.StreamID]*mergedStream, run *format.PassIndex, maxBytes int64) mergedLayout {
	lay := mergedLayout{at: make([]mergedAt, len(streams))}
	var n uint64
	var fill int64
	for si, id := range streams {
		ms := byID[id]
		if ms.marker != nil {
			lay.entries++
		}
		if len(ms.ents) == 0 {
			continue
		}
		lay.entries++
		var recLen int64
		var count uint64
		for _, e := range ms.ents {
			for _, g := range e.Segments {
				recLen += int64(g.Length) - int64(format.SegmentSize(0))
				count += uint64(g.Count)
			}
		}
		size := int64(format.SegmentSize(0)) + recLen
		if len(lay.packLen) == 0 {
			lay.packLen, lay.first = append(lay.packLen, 0), append(lay.first, si)
		} else if fill > 0 && fill+size > maxBytes && run.FirstSlot+n+1 < run.EndSlot {
			n++
			fill = 0
			lay.packLen, lay.first = append(lay.packLen, 0), append(lay.first, si)
		}
		lay.at[si] = mergedAt{pack: n, off: fill, length: size, count: count}
		fill += size
		lay.packLen[n] = fill
	}
	return lay
}

// storedPackFetches is how many stored merged packs a resuming merge
// reads back at once (at most MaxObjectBytes each).
const storedPackFetches = 16

// storedMergedPacks returns how many of the merged run's packs, from the
// first, are already stored, and the segments the layout puts in them
// (indexed as streams), each checked against the layout and the input
// entries. A stored pack that disagrees is ErrForeign: never normal (a
// copy with another MaxObjectBytes lays its packs out otherwise; it
// failed before on the first pack's PutDetermined).
func (s *Settler) storedMergedPacks(ctx context.Context, c metastore.ChainID, run *format.PassIndex, streams []format.StreamID,
	byID map[format.StreamID]*mergedStream, lay mergedLayout) (uint64, []format.PassSegment, error) {
	var segs []format.PassSegment
	key := func(n uint64) string {
		return format.MergedPackKey(c.Star, c.Class.String(), run.Epoch, run.FirstSlot, run.EndSlot, run.FirstSlot+n)
	}
	type got struct {
		body []byte
		err  error
	}
	packs := uint64(len(lay.packLen))
	for lo, hi := uint64(0), min(packs, 1); lo < packs; lo, hi = hi, min(packs, hi+storedPackFetches) {
		// The first batch is pack 0 alone: a merge not yet begun costs one
		// GET, not found.
		res := make([]chan got, hi-lo)
		for i := range res {
			res[i] = make(chan got, 1)
			go func(n uint64) {
				b, err := s.Settled.Get(ctx, key(n), 0, -1)
				res[n-lo] <- got{b, err}
			}(lo + uint64(i))
		}
		for i := range res {
			n := lo + uint64(i)
			g := <-res[i]
			if errors.Is(g.err, objstore.ErrNotFound) {
				for _, r := range res[i+1:] { // drop the reads ahead
					<-r
				}
				return n, segs, nil
			}
			if g.err != nil {
				for _, r := range res[i+1:] {
					<-r
				}
				return 0, nil, fmt.Errorf("read back merged pack %s: %w", key(n), g.err)
			}
			if segs == nil {
				segs = make([]format.PassSegment, len(streams))
			}
			if err := checkStoredPack(g.body, n, run, streams, byID, lay, segs); err != nil {
				for _, r := range res[i+1:] {
					<-r
				}
				return 0, nil, fmt.Errorf("merged pack %s: %w: %w", key(n), ErrForeign, err)
			}
		}
	}
	return packs, segs, nil
}

// checkStoredPack checks stored pack n against the layout and the input
// entries, and fills segs with its segments' locations.
func checkStoredPack(body []byte, n uint64, run *format.PassIndex, streams []format.StreamID,
	byID map[format.StreamID]*mergedStream, lay mergedLayout, segs []format.PassSegment) error {
	if int64(len(body)) != lay.packLen[n] {
		return fmt.Errorf("%d bytes, laid out %d", len(body), lay.packLen[n])
	}
	end := len(streams)
	if n+1 < uint64(len(lay.first)) {
		end = lay.first[n+1]
	}
	for si := lay.first[n]; si < end; si++ {
		at := lay.at[si]
		ms := byID[streams[si]]
		if len(ms.ents) == 0 {
			continue
		}
		seg := body[at.off : at.off+at.length]
		info, _, err := format.ParseSegment(seg)
		if err != nil {
			return fmt.Errorf("stream %s at %d: %w", streams[si], at.off, err)
		}
		if info.Stream != streams[si] || info.FirstSeq != ms.ents[0].FirstSeq || uint64(info.Count) != at.count {
			return fmt.Errorf("segment of %s at seq %d+%d at %d where stream %s seq %d+%d is laid out",
				info.Stream, info.FirstSeq, info.Count, at.off, streams[si], ms.ents[0].FirstSeq, at.count)
		}
		segs[si] = format.PassSegment{Slot: run.FirstSlot + n, FirstSeq: info.FirstSeq, Count: info.Count,
			Offset: uint32(at.off), Length: uint32(at.length), CRC: crcOf(seg)}
	}
	return nil
}
