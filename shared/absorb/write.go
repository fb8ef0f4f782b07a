package absorb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// ErrForeign: an object at a key whose content is determined (a pass
// index) holds other bytes. Never normal.
var ErrForeign = errors.New("absorb: foreign object at a determined key")

// BuildPassIndex turns the slots of the pass [first, end) of epoch (in
// slot order) into its pass index (design 014): per stream, in stream id
// order, its seq range, timestamps, record bytes, one segment per slot it
// rode, its producer marks (bounded by metastore.TrimMarks, as a ref's
// are) and its command state as of its last segment (a version-3 flight's
// command table: fencing token, trim point, configuration; what a ref's
// Commands holds, ADR 0042) and its newest carried table (a version-4
// flight's: the star's dedupe table, ADR 0062), so a successor recovering
// the stream from the window, and settle, keep them. It is pure and deterministic, as BuildRefs is, so every copy of a
// pass writes the same bytes; a stream whose seqs do not continue is
// ErrGap.
func BuildPassIndex(epoch, first, end uint64, slots []chain.Slot) (format.PassIndex, error) {
	p := format.PassIndex{Epoch: epoch, FirstSlot: first, EndSlot: end}
	at := make(map[format.StreamID]int)
	for _, s := range slots {
		for _, e := range s.Entries {
			seg := format.PassSegment{Slot: s.Seq, FirstSeq: e.FirstSeq, Count: e.Count, Offset: e.Offset, Length: e.Length, CRC: e.CRC}
			recBytes := int64(e.Length) - int64(format.SegmentSize(0))
			i, ok := at[e.Stream]
			if !ok {
				at[e.Stream] = len(p.Streams)
				p.Streams = append(p.Streams, format.PassStream{Stream: e.Stream, FirstSeq: e.FirstSeq, LastSeq: e.LastSeq(),
					FirstTsMs: e.FirstTsMs, LastTsMs: e.LastTsMs, Bytes: recBytes, Segments: []format.PassSegment{seg}})
				continue
			}
			st := &p.Streams[i]
			if st.LastSeq == ^uint64(0) || e.FirstSeq != st.LastSeq+1 {
				return format.PassIndex{}, fmt.Errorf("stream %s: segment at seq %d in %s follows seq %d: %w", e.Stream, e.FirstSeq, s.Key, st.LastSeq, ErrGap)
			}
			st.LastSeq, st.LastTsMs, st.Bytes = e.LastSeq(), e.LastTsMs, st.Bytes+recBytes
			st.Segments = append(st.Segments, seg)
		}
		for _, b := range s.Batches { // the parser checked b.Entry
			st := &p.Streams[at[s.Entries[b.Entry].Stream]]
			st.Marks = append(st.Marks, format.PassMark{Producer: b.Producer, BatchSeq: b.BatchSeq, FirstSeq: b.FirstSeq, LastSeq: b.LastSeq()})
		}
		for _, c := range s.Commands { // the parser checked c.Entry
			// The state after the segment: slots are in order, so the
			// stream's last segment with a state gives its state.
			cs := c.Commands
			p.Streams[at[s.Entries[c.Entry].Stream]].Commands = &cs
		}
		for _, c := range s.Carried { // the parser checked c.Entry and the marks
			// The newest carried table of the stream's part (ADR 0062).
			st := &p.Streams[at[s.Entries[c.Entry].Stream]]
			st.Carried, st.CarriedBelow = c.Marks, c.Below
		}
	}
	for i := range p.Streams {
		p.Streams[i].Marks = trimPassMarks(p.Streams[i].Marks)
	}
	slices.SortFunc(p.Streams, func(x, y format.PassStream) int { return bytes.Compare(x.Stream[:], y.Stream[:]) })
	return p, nil
}

// trimPassMarks bounds a stream's marks as metastore.TrimMarks bounds a
// ref's: the same marks a ref of the stream's part of the pass would keep.
func trimPassMarks(ms []format.PassMark) []format.PassMark {
	if len(ms) == 0 {
		return nil
	}
	rm := make([]metastore.ProducerMark, len(ms))
	for i, m := range ms {
		rm[i] = metastore.ProducerMark{Producer: m.Producer, BatchSeq: m.BatchSeq, FirstSeq: m.FirstSeq, LastSeq: m.LastSeq}
	}
	rm = metastore.TrimMarks(rm)
	out := make([]format.PassMark, len(rm))
	for i, m := range rm {
		out[i] = format.PassMark{Producer: m.Producer, BatchSeq: m.BatchSeq, FirstSeq: m.FirstSeq, LastSeq: m.LastSeq}
	}
	return out
}

// PutDetermined writes obj at key unless it is there: an object whose
// content the key determines (a rerun, or a racing copy, writes the same
// bytes), so an object already there (objstore.ErrExists, or an
// ErrAmbiguous write) must hold identical bytes, else ErrForeign. A read
// back that finds nothing is an error matching objstore.ErrNotFound (the
// object was written and deleted since: the caller's view is stale). obj
// is given to b (objstore.PutGiven): the caller must not write it after.
func PutDetermined(ctx context.Context, b objstore.Bucket, key string, obj []byte) error {
	return putDetermined(ctx, b, key, obj, objstore.PutGiven)
}

// PutDeterminedLent is PutDetermined of an obj its caller only lends
// (PutIfAbsent, never a Keeper's KeepIfAbsent): the caller may reuse obj
// once it returns (settle's object buffers, ADR 0072).
func PutDeterminedLent(ctx context.Context, b objstore.Bucket, key string, obj []byte) error {
	return putDetermined(ctx, b, key, obj, func(ctx context.Context, b objstore.Bucket, key string, obj []byte) error {
		return b.PutIfAbsent(ctx, key, obj)
	})
}

func putDetermined(ctx context.Context, b objstore.Bucket, key string, obj []byte,
	put func(context.Context, objstore.Bucket, string, []byte) error) error {
	err := put(ctx, b, key, obj)
	if err == nil {
		return nil
	}
	if !errors.Is(err, objstore.ErrExists) && !errors.Is(err, objstore.ErrAmbiguous) {
		return fmt.Errorf("write %s: %w", key, err)
	}
	got, gerr := b.Get(ctx, key, 0, -1)
	if gerr != nil {
		return fmt.Errorf("write %s: %v; read back: %w", key, err, gerr)
	}
	if !bytes.Equal(got, obj) {
		return fmt.Errorf("%s holds %d other bytes (want %d): %w", key, len(got), len(obj), ErrForeign)
	}
	return nil
}

// writeIndex writes the pass index of [from, to) built from slots.
func (a *Absorber) writeIndex(ctx context.Context, c metastore.ChainID, from, to metastore.Cursor, slots []chain.Slot) (int, error) {
	p, err := BuildPassIndex(from.Epoch, from.Slot, to.Slot, slots)
	if err != nil {
		return 0, err
	}
	obj, err := format.AppendPassIndex(nil, p)
	if err != nil {
		return 0, fmt.Errorf("encode pass index: %w", err)
	}
	if err := PutDetermined(ctx, a.Index, format.PassIndexKey(c.Star, c.Class.String(), from.Epoch, from.Slot), obj); err != nil {
		return 0, fmt.Errorf("pass index: %w", err)
	}
	return len(p.Streams), nil
}
