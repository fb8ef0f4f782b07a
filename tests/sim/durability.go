package sim

// The durability checker reads the raw chain buckets (the memory stores
// under every fault injector and test wrapper) and the unfaulted
// metastore, never a star's memory:
//
//   - Durable: every slot from the settled cursor up to a star's released
//     head (through each earlier epoch's fenced cut) holds at least W valid
//     flight copies: the whole object
//     parses with every CRC good (format.ParseFlight), and its envelope names
//     the slot's epoch, slot and the nonce the epoch record holds. A copy
//     the workload damaged on purpose (MarkCorrupted) counts as present: bit
//     rot of one copy is a fault the system must survive, not one it
//     causes.
//   - Successor: a read.Index built from what a successor star would read
//     after a takeover: refs below the checkpoint (through the reader), and
//     the flights of every slot from the checkpoint to each fenced epoch's
//     cut and, in the live epoch, to the released head, each from a valid
//     copy in the raw buckets.

import (
	"context"
	"errors"
	"fmt"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/star"
)

// ErrNotDurable is returned when a released slot has fewer than W valid
// copies in the raw buckets.
var ErrNotDurable = errors.New("sim: released slot not durable")

type copyKey struct {
	bucket int
	key    string
}

type slotSegment struct {
	stream format.StreamID
	first  uint64
	recs   []format.Record
}

// Durability checks released slots against the raw buckets. Valid copies
// are remembered by size (an object is immutable until deleted; the only
// rewrite is CorruptAtRest, which reports itself through MarkCorrupted).
type Durability struct {
	w         *World
	valid     map[copyKey]int64
	corrupted map[copyKey]bool
	segs      map[string][]slotSegment // decoded segments of a slot's valid copy, by key
	// Checked counts the slot copies checked, for the summary.
	Checked int64
}

// NewDurability returns a checker of w's raw buckets.
func NewDurability(w *World) *Durability {
	return &Durability{w: w, valid: map[copyKey]int64{}, corrupted: map[copyKey]bool{}, segs: map[string][]slotSegment{}}
}

// MarkCorrupted records that the workload damaged the copy of key in
// bucket i on purpose.
func (d *Durability) MarkCorrupted(i int, key string) {
	ck := copyKey{i, key}
	d.corrupted[ck] = true
	delete(d.valid, ck)
}

// epoch returns the record of epoch (its writer nonce, its cut) from the
// unfaulted metastore.
func (d *Durability) epoch(ctx context.Context, epoch uint64) (metastore.Epoch, error) {
	rec, err := d.w.Meta.GetEpoch(ctx, Chain, epoch)
	if err != nil {
		return rec, fmt.Errorf("sim: epoch %d record: %w", epoch, err)
	}
	return rec, nil
}

// validCopy reports whether bucket i holds a valid flight copy of
// (epoch, slot) written under nonce, reading the raw store.
func (d *Durability) validCopy(ctx context.Context, i int, epoch, slot uint64, nonce [16]byte) (bool, error) {
	key := format.SlotKey(StarID, epoch, slot)
	ck := copyKey{i, key}
	m := d.w.Mems[i]
	if size, ok := d.valid[ck]; ok {
		got, err := m.Head(ctx, key)
		if err == nil && got == size {
			return true, nil
		}
		delete(d.valid, ck)
		if err != nil && !errors.Is(err, objstore.ErrNotFound) {
			return false, err
		}
	}
	d.Checked++
	body, err := m.Get(ctx, key, 0, -1)
	if errors.Is(err, objstore.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	f, err := format.ParseFlight(body)
	if err != nil || f.Envelope.Epoch != epoch || f.Envelope.Slot != slot || f.Envelope.Nonce != nonce {
		return false, nil
	}
	if _, ok := d.segs[key]; !ok {
		var segs []slotSegment
		for _, en := range f.Entries {
			info, recs, err := format.DecodeSegment(body[en.Offset : en.Offset+en.Length])
			if err != nil {
				return false, fmt.Errorf("sim: %s passed ParseFlight but segment at %d does not decode: %w", key, en.Offset, err)
			}
			segs = append(segs, slotSegment{stream: info.Stream, first: info.FirstSeq, recs: recs})
		}
		d.segs[key] = segs
	}
	d.valid[ck] = int64(len(body))
	return true, nil
}

// Durable checks that every slot from the settled cursor up to rel holds
// at least W valid flight copies in the raw buckets: in rel's epoch the
// slots below rel, in each earlier epoch the slots below its fenced cut
// (committed, so their refs may point at them). Slots below the settled
// cursor live in settled objects and may be trimmed from the chain.
func (d *Durability) Durable(ctx context.Context, rel, settled metastore.Cursor) error {
	for e := max(settled.Epoch, 1); e <= rel.Epoch; e++ {
		rec, err := d.epoch(ctx, e)
		if errors.Is(err, metastore.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		from, end := uint64(0), rel.Slot
		if e == settled.Epoch {
			from = settled.Slot
		}
		if e < rel.Epoch {
			if rec.State != metastore.EpochFenced {
				return fmt.Errorf("sim: epoch %d below %d (released %v) is not fenced", e, rel.Epoch, rel)
			}
			end = rec.Cut
		}
		for slot := from; slot < end; slot++ {
			if err := d.slotDurable(ctx, e, slot, rec.Nonce, rel); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *Durability) slotDurable(ctx context.Context, epoch, slot uint64, nonce [16]byte, rel metastore.Cursor) error {
	key := format.SlotKey(StarID, epoch, slot)
	n, damaged := 0, 0
	for i := range d.w.Mems {
		ok, err := d.validCopy(ctx, i, epoch, slot, nonce)
		if err != nil {
			return err
		}
		switch {
		case ok:
			n++
		case d.corrupted[copyKey{i, key}]:
			damaged++
		}
	}
	if n+damaged < d.w.Opt.W {
		return fmt.Errorf("%w: slot %d/%d (released head %v) has %d valid flight copies (%d damaged on purpose), W=%d",
			ErrNotDurable, epoch, slot, rel, n, damaged, d.w.Opt.W)
	}
	return nil
}

// Successor returns the index a successor star would rebuild: the flights
// of every slot from head's checkpoint up to rel (through each earlier
// epoch's fenced cut), each read from a valid raw copy, and each stream's
// tail recovered from its last ref.
func (d *Durability) Successor(ctx context.Context, head metastore.Head, rel metastore.Cursor) (*SuccessorIndex, error) {
	x := &SuccessorIndex{recs: map[format.StreamID][]star.SeqRecord{}, tail: map[format.StreamID]uint64{}, lastTs: map[format.StreamID]int64{}}
	for i, id := range d.w.IDs {
		r, err := d.w.RefReader(i).LastRef(ctx, id.String())
		switch {
		case err == nil:
			x.tail[id], x.lastTs[id] = r.LastSeq+1, r.LastTsMs
		case !errors.Is(err, metastore.ErrNotFound):
			return nil, fmt.Errorf("sim: last ref of %s: %w", id, err)
		}
		// As a successor: the tail never moves below trim's floor.
		st, err := d.w.Meta.GetStream(ctx, d.w.Streams[i].Name)
		if err != nil {
			return nil, fmt.Errorf("sim: the floor of %s: %w", d.w.Streams[i].Name, err)
		}
		x.tail[id] = max(x.tail[id], st.Floor)
	}
	cp := head.Checkpoint
	for e := cp.Epoch; e <= rel.Epoch; e++ {
		if e == 0 {
			continue
		}
		rec, err := d.epoch(ctx, e)
		if errors.Is(err, metastore.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		from, end := uint64(0), rel.Slot
		if e == cp.Epoch {
			from = cp.Slot
		}
		if e < rel.Epoch {
			if rec.State != metastore.EpochFenced {
				return nil, fmt.Errorf("sim: epoch %d below the live epoch %d is not fenced", e, rel.Epoch)
			}
			end = rec.Cut
		}
		for slot := from; slot < end; slot++ {
			key := format.SlotKey(StarID, e, slot)
			found := false
			for i := range d.w.Mems {
				ok, err := d.validCopy(ctx, i, e, slot, rec.Nonce)
				if err != nil {
					return nil, err
				}
				if ok {
					found = true
					break
				}
			}
			if !found {
				return nil, fmt.Errorf("%w: a successor finds no valid copy of slot %d/%d (checkpoint %v, released %v)", ErrNotDurable, e, slot, cp, rel)
			}
			for _, sg := range d.segs[key] {
				x.add(sg)
			}
		}
	}
	return x, nil
}

// SuccessorIndex is a read.Index over what a successor would read.
type SuccessorIndex struct {
	recs   map[format.StreamID][]star.SeqRecord
	tail   map[format.StreamID]uint64
	lastTs map[format.StreamID]int64
}

func (x *SuccessorIndex) add(sg slotSegment) {
	for i, r := range sg.recs {
		seq := sg.first + uint64(i)
		x.recs[sg.stream] = append(x.recs[sg.stream], star.SeqRecord{Seq: seq, Record: r})
		if seq+1 > x.tail[sg.stream] {
			x.tail[sg.stream], x.lastTs[sg.stream] = seq+1, r.TimestampMs
		}
	}
}

// Tail is the stream's next seq: after its last ref or its last flight
// record below the bound, whichever is later.
func (x *SuccessorIndex) Tail(id format.StreamID) (uint64, int64, error) {
	return x.tail[id], x.lastTs[id], nil
}

// ReadIndex serves the flight records with seq >= from; low is the first
// seq the flights hold (the tail when none): below it, refs.
func (x *SuccessorIndex) ReadIndex(id format.StreamID, from uint64, maxRecords, maxBytes int) ([]star.SeqRecord, uint64, error) {
	rs := x.recs[id]
	low := x.tail[id]
	if len(rs) > 0 {
		low = rs[0].Seq
	}
	var out []star.SeqRecord
	size := 0
	for _, r := range rs {
		if r.Seq < from {
			continue
		}
		n := format.EncodedSize(r.Record)
		if len(out) >= maxRecords || (len(out) > 0 && size+n > maxBytes) {
			break
		}
		out = append(out, r)
		size += n
	}
	return out, low, nil
}

// WatchStream is not served: the checks read, they do not follow.
func (x *SuccessorIndex) WatchStream(format.StreamID) (uint64, <-chan struct{}, error) {
	return 0, nil, errors.New("sim: the successor index does not watch")
}
