// Package absorbtest is test support for settlement: a fake star that
// writes flights to a bucket set exactly as the write path does (one
// format.Builder flight per slot, PutIfAbsent to every bucket, epochs
// minted and fenced in the metastore), deterministic streams and records,
// and a reader that reads a stream back through its refs (transit
// locations through the bucket set, settled ones from the settled bucket)
// and checks that its seqs are contiguous from 0.
package absorbtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// StreamIDs returns n deterministic stream ids.
func StreamIDs(n int) []format.StreamID {
	out := make([]format.StreamID, n)
	for i := range out {
		out[i][0] = 0x5a
		out[i][15] = byte(i + 1)
		out[i][14] = byte((i + 1) >> 8)
		out[i][13] = byte((i + 1) >> 16)
	}
	return out
}

// Records returns n deterministic records of a stream from seq, with
// timestamps from tsMs (one ms apart), a header and a body of about size
// bytes that name the stream and seq.
func Records(id format.StreamID, seq uint64, n int, tsMs int64, size int) []format.Record {
	out := make([]format.Record, n)
	for i := range out {
		s := seq + uint64(i)
		body := []byte(fmt.Sprintf("%s#%d:", id, s))
		for len(body) < size {
			body = append(body, byte('a'+len(body)%26))
		}
		out[i] = format.Record{
			TimestampMs: tsMs + int64(i),
			Headers:     []format.Header{{Name: []byte("seq"), Value: []byte(strconv.FormatUint(s, 10))}},
			Body:        body,
		}
	}
	return out
}

// Star is a fake star's loglet of one class: it writes flights to its set
// and keeps every record it wrote (all acknowledged), per stream, in seq
// order. It is not safe for concurrent use.
type Star struct {
	Chain metastore.ChainID
	Set   chain.Set
	Meta  metastore.Store
	Epoch uint64
	Slot  uint64 // next slot to write in Epoch
	// Commands, when it holds a stream, is the command state its
	// segments' footer entries carry (a version 3 flight; the records
	// stay ordinary: tests of what the index and settle carry).
	Commands map[format.StreamID]*format.StreamCommands
	// Carried, when it holds a stream, is the carried dedupe table its
	// segments carry (a version 4 flight, ADR 0062), with the segment's
	// first seq as its acknowledged tail; not written while a mark is at
	// or past that seq.
	Carried map[format.StreamID][]format.PassMark
	// Producers: each segment of a stream listed here is one batch of
	// its producer (batch seqs 0, 1, 2...), so its entries carry
	// producer marks.
	Producers map[format.StreamID]format.ProducerID
	batchSeq  map[format.StreamID]uint64

	next    map[format.StreamID]uint64
	written map[format.StreamID][]format.Record
	b       *format.Builder
}

// NewStar mints the chain's first epoch and returns its writer.
func NewStar(ctx context.Context, meta metastore.Store, c metastore.ChainID, set chain.Set) (*Star, error) {
	s := &Star{Chain: c, Set: set, Meta: meta, next: map[format.StreamID]uint64{},
		written: map[format.StreamID][]format.Record{}, b: format.NewBuilder()}
	return s, s.mint(ctx, 0, 1)
}

func (s *Star) mint(ctx context.Context, prev, epoch uint64) error {
	names := make([]string, len(s.Set.Buckets))
	for i, b := range s.Set.Buckets {
		names[i] = b.Name()
	}
	e := metastore.Epoch{Epoch: epoch, State: metastore.EpochActive, K: len(names), W: s.Set.W, Buckets: names, Window: 8}
	e.Nonce[0] = byte(epoch)
	if err := s.Meta.MintEpoch(ctx, s.Chain, prev, e); err != nil {
		return fmt.Errorf("absorbtest: mint epoch %d: %w", epoch, err)
	}
	s.Epoch, s.Slot = epoch, 0
	return nil
}

// Flight writes one flight holding, for each stream in ids order, the
// given number of new records (starting at tsMs, size bytes), to every
// bucket of the set (only to the first `copies` buckets if copies > 0:
// a straggling copy), and returns its slot.
func (s *Star) Flight(ctx context.Context, ids []format.StreamID, counts []int, tsMs int64, size, copies int) (uint64, error) {
	var nonce format.Nonce
	nonce[0] = byte(s.Epoch)
	s.b.Reset(s.Epoch, s.Slot, nonce)
	for i, id := range ids {
		if counts[i] == 0 {
			continue
		}
		seq := s.next[id]
		recs := Records(id, seq, counts[i], tsMs, size)
		var enc []byte
		for _, r := range recs {
			enc = format.AppendRecord(enc, r)
		}
		s.b.BeginSegment(id, seq)
		s.b.AddRecords(enc, len(recs), recs[0].TimestampMs, recs[len(recs)-1].TimestampMs)
		if c := s.Commands[id]; c != nil {
			s.b.SetCommands(*c)
		}
		if ms := s.Carried[id]; len(ms) > 0 && ms[len(ms)-1].LastSeq < seq {
			s.b.SetCarried(seq, ms)
		}
		if p, ok := s.Producers[id]; ok {
			if s.batchSeq == nil {
				s.batchSeq = map[format.StreamID]uint64{}
			}
			s.b.AddBatch(p, s.batchSeq[id], seq, len(recs))
			s.batchSeq[id]++
		}
		s.b.EndSegment()
		s.next[id] = seq + uint64(len(recs))
		s.written[id] = append(s.written[id], recs...)
	}
	obj := s.b.Finish()
	key := format.SlotKey(s.Set.Star, s.Epoch, s.Slot)
	n := len(s.Set.Buckets)
	if copies > 0 {
		n = copies
	}
	for _, b := range s.Set.Buckets[:n] {
		if err := b.PutIfAbsent(ctx, key, slices.Clone(obj)); err != nil {
			return 0, fmt.Errorf("absorbtest: write %s: %w", key, err)
		}
	}
	s.Slot++
	return s.Slot - 1, nil
}

// Released is the released head: every slot written so far.
func (s *Star) Released() metastore.Cursor { return metastore.Cursor{Epoch: s.Epoch, Slot: s.Slot} }

// Halt fences the current epoch at its next slot (the cut: poison in every
// bucket) and mints the next epoch (skip > 0 skips that many epoch
// numbers).
func (s *Star) Halt(ctx context.Context, skip int) error {
	key := format.SlotKey(s.Set.Star, s.Epoch, s.Slot)
	for _, b := range s.Set.Buckets {
		p := format.Poison(s.Epoch, s.Slot, format.Nonce{0xff})
		if err := b.PutIfAbsent(ctx, key, p.Bytes()); err != nil {
			return fmt.Errorf("absorbtest: poison %s: %w", key, err)
		}
	}
	err := s.Meta.UpdateEpoch(ctx, s.Chain, metastore.EpochActive, metastore.Epoch{Epoch: s.Epoch, State: metastore.EpochFenced, Cut: s.Slot})
	if err != nil {
		return fmt.Errorf("absorbtest: fence epoch %d: %w", s.Epoch, err)
	}
	return s.mint(ctx, s.Epoch, s.Epoch+1+uint64(skip))
}

// Written is every record written to stream id, in seq order from 0.
func (s *Star) Written(id format.StreamID) []format.Record { return s.written[id] }

// ReadStream reads stream id's records through its refs, from seq 0, and
// checks that the refs cover contiguous seqs from 0 (no gap, no overlap)
// and that every segment is whole and of the stream.
func ReadStream(ctx context.Context, meta metastore.Store, set chain.Set, settled objstore.Bucket, id format.StreamID) ([]format.Record, error) {
	var out []format.Record
	next := uint64(0)
	for {
		refs, err := meta.QueryRefs(ctx, id.String(), next, 100)
		if err != nil {
			return nil, err
		}
		if len(refs) == 0 {
			return out, nil
		}
		for _, r := range refs {
			if r.FirstSeq != next {
				return nil, fmt.Errorf("stream %s: ref at %d, want %d (gap or overlap)", id, r.FirstSeq, next)
			}
			recs, err := ReadRef(ctx, set, settled, r)
			if err != nil {
				return nil, err
			}
			out = append(out, recs...)
			next = r.LastSeq + 1
		}
	}
}

// ReadRef reads one ref's records and checks them against the ref.
func ReadRef(ctx context.Context, set chain.Set, settled objstore.Bucket, r metastore.Ref) ([]format.Record, error) {
	var out []format.Record
	seq := r.FirstSeq
	for _, l := range r.Locations {
		var seg []byte
		var err error
		if l.Settled {
			seg, err = settled.Get(ctx, l.Key, l.Offset, l.Length)
		} else {
			seg, err = set.ReadRange(ctx, l.Key, l.Offset, l.Length, func(b []byte) error { _, _, err := format.ParseSegment(b); return err })
		}
		if err != nil {
			return nil, fmt.Errorf("ref %s@%d: %w", r.StreamID, r.FirstSeq, err)
		}
		info, recs, err := format.DecodeSegment(seg)
		if err != nil {
			return nil, fmt.Errorf("ref %s@%d: %s: %w", r.StreamID, r.FirstSeq, l.Key, err)
		}
		if info.Stream.String() != r.StreamID || info.FirstSeq != seq {
			return nil, fmt.Errorf("ref %s@%d: segment of %s at %d, want seq %d", r.StreamID, r.FirstSeq, info.Stream, info.FirstSeq, seq)
		}
		seq += uint64(info.Count)
		out = append(out, recs...)
	}
	if seq != r.LastSeq+1 {
		return nil, fmt.Errorf("ref %s@%d-%d: locations hold seqs to %d", r.StreamID, r.FirstSeq, r.LastSeq, seq-1)
	}
	return out, nil
}

// Equal compares records field by field, returning the first difference.
func Equal(got, want []format.Record) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d records, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.TimestampMs != w.TimestampMs || string(g.Body) != string(w.Body) || len(g.Headers) != len(w.Headers) {
			return fmt.Errorf("record %d: got %+v, want %+v", i, g, w)
		}
		for j := range g.Headers {
			if string(g.Headers[j].Name) != string(w.Headers[j].Name) || string(g.Headers[j].Value) != string(w.Headers[j].Value) {
				return fmt.Errorf("record %d header %d differs", i, j)
			}
		}
	}
	return nil
}

// ErrFault is what fault wrappers return.
var ErrFault = errors.New("absorbtest: injected fault")
