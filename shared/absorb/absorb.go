package absorb

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
)

// Defaults.
const (
	// DefaultMaxSlotsPerPass bounds the slots one pass covers, and so the
	// locations of one ref (one per slot the stream rode): 512 locations
	// keep a ref item far below DynamoDB's 400 KB.
	DefaultMaxSlotsPerPass = 512
	// DefaultMaxPassesPerRun bounds the passes of one Run.
	DefaultMaxPassesPerRun = 16
)

// ErrGap: a stream's seqs are not contiguous across the slots of a pass. It
// means the chain holds something the write path never should have written;
// the pass stops before writing anything.
var ErrGap = errors.New("absorb: stream seqs not contiguous")

// Absorber turns committed chain slots into span refs and advances the
// checkpoint. It is safe for concurrent use, and any number of copies may
// run at once: see the package documentation.
type Absorber struct {
	Meta metastore.Store
	Sets Sets
	// MaxSlotsPerPass: 0 is DefaultMaxSlotsPerPass.
	MaxSlotsPerPass int
	// MaxPassesPerRun: 0 is DefaultMaxPassesPerRun.
	MaxPassesPerRun int
	// Index switches the pass to the pass index (design 014): when set (the
	// settled bucket), a pass writes one index object there instead of one
	// ref per stream, so its metastore writes are BeginAbsorb and
	// AdvanceCursor whatever it covers. nil writes refs. The first pass
	// with it set records where indexing begins (Head.Indexed; design
	// 014, "Switching a live chain"); a pass is indexed when it starts at
	// or after that cursor, whatever the switch: a pass of a chain not
	// yet indexed is completed with refs, and with Index nil a pass of an
	// indexed chain is refused (ErrIndexed).
	Index objstore.Bucket
	// Log: nil is slog.Default().
	Log *slog.Logger

	windowOnce sync.Once
	window     *passindex.Window // IndexedFrom's probes, with Index
}

func (a *Absorber) maxSlots() int {
	if a.MaxSlotsPerPass > 0 {
		return a.MaxSlotsPerPass
	}
	return DefaultMaxSlotsPerPass
}

func (a *Absorber) log() *slog.Logger {
	if a.Log != nil {
		return a.Log
	}
	return slog.Default()
}

// Result says what one pass did.
type Result struct {
	From, To metastore.Cursor // the checkpoint moved (or was found moved) from From to To
	Slots    int              // slots walked
	Refs     int              // refs written (one per stream)
	Indexed  int              // streams in the pass index written (Absorber.Index)
	Joined   bool             // completed another copy's pass (its lease) instead of its own
	Epoch    bool             // an epoch step: from a cut to the next epoch
	Lost     bool             // another copy completed the pass first
}

// Noop reports whether the pass found nothing to do.
func (r Result) Noop() bool { return r.From == r.To }

// Pass runs one absorb pass on chain. released is the chain's released head
// from a release event (every slot of its epoch below it is committed); the
// zero Cursor asks for a sweep, which absorbs up to the last slot it proves
// committed (W flight copies). A pass covers at most MaxSlotsPerPass slots
// of one epoch, or is an epoch step.
func (a *Absorber) Pass(ctx context.Context, c metastore.ChainID, released metastore.Cursor) (Result, error) {
	h, err := a.Meta.GetHead(ctx, c)
	if err != nil {
		return Result{}, fmt.Errorf("absorb %s: %w", c, err)
	}
	if a.Index != nil && h.Indexed.IsZero() && h.Absorbing.IsZero() {
		// The first pass with the switch on: record where indexing begins
		// (design 014, "Switching a live chain").
		if h, err = a.startIndexing(ctx, c, h); err != nil {
			return Result{}, err
		}
	}
	from := h.Checkpoint
	res := Result{From: from, To: from}
	if !h.Absorbing.IsZero() {
		res.Joined = true
		return a.complete(ctx, c, h, from, h.Absorbing, res)
	}
	if a.Index == nil && PassIndexed(h, from) {
		return res, IndexedErr("absorb", c, h.Indexed)
	}
	set, err := a.Sets.For(c)
	if err != nil {
		return res, err
	}
	var end uint64
	switch {
	case from.Epoch < h.Epoch:
		// The chain moved on to a later epoch: this one is fenced and its
		// cut bounds it.
		cut, exists, err := passindex.EpochCut(ctx, a.Meta, c, from.Epoch)
		if err != nil {
			return res, err
		}
		if !exists || from.Slot >= cut {
			return a.epochStep(ctx, c, from, res)
		}
		end = cut
		if released.Epoch == from.Epoch {
			end = min(end, released.Slot)
		}
	case released.IsZero():
		end, err = a.committed(ctx, set, from)
		if err != nil {
			return res, err
		}
	case released.Epoch == from.Epoch:
		end = released.Slot
	default:
		// An event of another epoch than the checkpoint's (stale, or ahead
		// of a head we read stale): nothing to do on its word.
		return res, nil
	}
	end = min(end, from.Slot+uint64(a.maxSlots()))
	if end <= from.Slot {
		return res, nil
	}
	to := metastore.Cursor{Epoch: from.Epoch, Slot: end}
	lease, err := a.Meta.BeginAbsorb(ctx, c, from, to)
	switch {
	case errors.Is(err, metastore.ErrConflict) && lease.Checkpoint == from && !lease.Absorbing.IsZero():
		// Another copy holds the lease from this checkpoint: complete its
		// pass, so that every pass from here writes the same refs.
		res.Joined = true
		to = lease.Absorbing
		return a.complete(ctx, c, lease, from, to, res)
	case errors.Is(err, metastore.ErrConflict):
		// The checkpoint moved: another copy did the work.
		res.Lost, res.To = true, lease.Checkpoint
		return res, nil
	case err != nil:
		return res, fmt.Errorf("absorb %s: begin pass %s-%s: %w", c, from, to, err)
	}
	return a.complete(ctx, c, lease, from, to, res)
}

// committed returns the end of the run of committed slots from `from`,
// probing at most MaxSlotsPerPass slots: a slot is committed when W buckets
// hold its flight. A committed slot is durable and never disowned, so a
// sweep may absorb it before its ack is released.
func (a *Absorber) committed(ctx context.Context, set chain.Set, from metastore.Cursor) (uint64, error) {
	end := from.Slot
	for range a.maxSlots() {
		key := format.SlotKey(set.Star, from.Epoch, end)
		states := make([]chain.State, set.K())
		for i := range set.Buckets {
			cp, err := set.ReadEnvelope(ctx, i, key)
			if err != nil {
				states[i] = chain.Unknown
				continue
			}
			states[i] = cp.State
		}
		if chain.Classify(set.W, states) != chain.Committed {
			break
		}
		end++
	}
	return end, nil
}

func (a *Absorber) epochStep(ctx context.Context, c metastore.ChainID, from metastore.Cursor, res Result) (Result, error) {
	to := metastore.Cursor{Epoch: from.Epoch + 1}
	res.Epoch = true
	err := a.Meta.AdvanceCursor(ctx, c, metastore.Checkpoint, from, to)
	if errors.Is(err, metastore.ErrConflict) {
		res.Lost = true
	} else if err != nil {
		return res, fmt.Errorf("absorb %s: step checkpoint %s to %s: %w", c, from, to, err)
	}
	res.To = to
	return res, nil
}

// complete runs the pass [from, to) that holds the lease in head h: walk,
// write the refs or (a pass at or after h.Indexed) the pass index, move
// the checkpoint (which releases the lease). The mode is the head's, not
// the switch's: the switch on completes a refs pass it joined with refs,
// and the switch off refuses an indexed one (ErrIndexed).
func (a *Absorber) complete(ctx context.Context, c metastore.ChainID, h metastore.Head, from, to metastore.Cursor, res Result) (Result, error) {
	indexed, err := a.passIndexed(ctx, c, h, from)
	if err != nil {
		return res, err
	}
	if indexed && a.Index == nil {
		return res, IndexedErr("absorb", c, h.Indexed)
	}
	set, err := a.Sets.For(c)
	if err != nil {
		return res, err
	}
	var slots []chain.Slot
	err = set.Walk(ctx, from.Epoch, from.Slot, to.Slot, func(s chain.Slot) error {
		slots = append(slots, s)
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("absorb %s: pass %s-%s: %w", c, from, to, err)
	}
	res.Slots = len(slots)
	if indexed {
		if res.Indexed, err = a.writeIndex(ctx, c, from, to, slots); err != nil {
			return res, fmt.Errorf("absorb %s: pass %s-%s: %w", c, from, to, err)
		}
		return a.advance(ctx, c, from, to, res)
	}
	refs, err := BuildRefs(slots)
	if err != nil {
		return res, fmt.Errorf("absorb %s: pass %s-%s: %w", c, from, to, err)
	}
	for chunk := range metastore.RefChunks(refs) {
		err := a.Meta.PutRefs(ctx, c, to, chunk)
		if errors.Is(err, metastore.ErrConflict) {
			// The pass is no longer current: another copy completed it.
			res.Lost, res.To = true, to
			return res, nil
		}
		if err != nil {
			return res, fmt.Errorf("absorb %s: pass %s-%s: put refs: %w", c, from, to, err)
		}
		res.Refs += len(chunk)
	}
	return a.advance(ctx, c, from, to, res)
}

// advance ends the pass [from, to): the checkpoint CAS, which releases the
// lease.
func (a *Absorber) advance(ctx context.Context, c metastore.ChainID, from, to metastore.Cursor, res Result) (Result, error) {
	err := a.Meta.AdvanceCursor(ctx, c, metastore.Checkpoint, from, to)
	if errors.Is(err, metastore.ErrConflict) {
		res.Lost = true
	} else if err != nil {
		return res, fmt.Errorf("absorb %s: pass %s-%s: advance checkpoint: %w", c, from, to, err)
	}
	res.To = to
	a.log().Debug("absorb pass", "chain", c.String(), "from", from.String(), "to", to.String(),
		"slots", res.Slots, "refs", res.Refs, "indexed", res.Indexed, "joined", res.Joined, "lost", res.Lost)
	return res, nil
}

// BuildRefs turns the slots of one pass (in slot order) into refs, sorted
// by stream id then seq: per stream its seq range, timestamps, record
// bytes, and one transit location per segment in slot order, split into
// several adjacent refs where one would be over metastore.MaxRefBytes (a
// stream in many slots of a long pass), so every ref is an item DynamoDB
// takes and a pass can always be written. It is pure and deterministic: the
// same slots give the same refs, which is what makes a rerun write
// identical items. A stream whose seqs do not continue from one segment to
// the next is ErrGap. Each ref keeps the producer marks of the producer
// batches it holds (the slots' batch tables), bounded by
// metastore.TrimMarks: a successor star rebuilds its dedupe table from them.
// A ref whose last segment has command state (a version-3 flight's command
// table) keeps it: a successor star seeds the stream's fencing token and
// trim point from its last ref. A ref keeps the newest carried table of
// its segments (a version-4 flight's, ADR 0062).
func BuildRefs(slots []chain.Slot) ([]metastore.Ref, error) {
	type run struct {
		done []metastore.Ref // full refs of the stream, in seq order
		cur  *metastore.Ref
		size int // metastore.RefSize(*cur)
	}
	byStream := make(map[format.StreamID]*run)
	for _, s := range slots {
		for _, e := range s.Entries {
			loc := metastore.Location{Key: s.Key, Offset: int64(e.Offset), Length: int64(e.Length), FirstSeq: e.FirstSeq}
			recBytes := int64(e.Length) - int64(format.SegmentSize(0))
			st := byStream[e.Stream]
			if st != nil {
				r := st.cur
				if r.LastSeq == ^uint64(0) || e.FirstSeq != r.LastSeq+1 {
					return nil, fmt.Errorf("stream %s: segment at seq %d in %s follows seq %d: %w",
						r.StreamID, e.FirstSeq, s.Key, r.LastSeq, ErrGap)
				}
				if n := metastore.LocationSize(loc); st.size+n <= metastore.MaxRefBytes {
					r.LastSeq = e.LastSeq()
					r.LastTsMs = e.LastTsMs
					r.Bytes += recBytes
					r.Locations = append(r.Locations, loc)
					st.size += n
					continue
				}
				st.done = append(st.done, *r) // full: the segment starts the next ref
			} else {
				st = &run{}
				byStream[e.Stream] = st
			}
			st.cur = &metastore.Ref{
				StreamID:  e.Stream.String(),
				FirstSeq:  e.FirstSeq,
				LastSeq:   e.LastSeq(),
				FirstTsMs: e.FirstTsMs,
				LastTsMs:  e.LastTsMs,
				Bytes:     recBytes,
				Locations: []metastore.Location{loc},
			}
			st.size = metastore.RefSize(*st.cur)
			if st.size > metastore.MaxRefBytes {
				return nil, fmt.Errorf("stream %s: one location (key %.64q) is over a ref's size bound: %w", e.Stream, s.Key, metastore.ErrTooLarge)
			}
		}
		for _, b := range s.Batches { // the parser checked b.Entry
			// The slot's segment of the stream is the last of its current ref.
			r := byStream[s.Entries[b.Entry].Stream].cur
			r.Producers = append(r.Producers, metastore.ProducerMark{Producer: b.Producer, BatchSeq: b.BatchSeq, FirstSeq: b.FirstSeq, LastSeq: b.LastSeq()})
		}
		for _, c := range s.Commands { // the parser checked c.Entry
			// The state after the segment, the last of its stream's current
			// ref: the state as of that ref's last record.
			cs := c.Commands
			byStream[s.Entries[c.Entry].Stream].cur.Commands = &cs
		}
		for _, c := range s.Carried { // the parser checked c.Entry and the marks
			// The newest carried table of the ref's segments (ADR 0062):
			// its marks lie below the segment, so inside the ref's seqs.
			r := byStream[s.Entries[c.Entry].Stream].cur
			r.Carried, r.CarriedBelow = metastore.FromPassMarks(c.Marks), c.Below
		}
	}
	refs := make([]metastore.Ref, 0, len(byStream))
	for _, st := range byStream {
		for _, r := range append(st.done, *st.cur) {
			r.Producers = metastore.TrimMarks(r.Producers)
			refs = append(refs, r)
		}
	}
	slices.SortFunc(refs, func(x, y metastore.Ref) int {
		if c := strings.Compare(x.StreamID, y.StreamID); c != 0 {
			return c
		}
		return cmp.Compare(x.FirstSeq, y.FirstSeq)
	})
	return refs, nil
}

// Run runs passes on chain until the checkpoint reaches released (for a
// sweep, the zero Cursor: until a pass finds nothing committed to take),
// at most MaxPassesPerRun of them. It returns the checkpoint reached.
func (a *Absorber) Run(ctx context.Context, c metastore.ChainID, released metastore.Cursor) (metastore.Cursor, error) {
	n := a.MaxPassesPerRun
	if n <= 0 {
		n = DefaultMaxPassesPerRun
	}
	var at metastore.Cursor
	for range n {
		res, err := a.Pass(ctx, c, released)
		if err != nil {
			return res.To, err
		}
		at = res.To
		if res.Noop() && !res.Lost {
			return at, nil
		}
		if !released.IsZero() && !at.Less(released) {
			return at, nil
		}
		if err := ctx.Err(); err != nil {
			return at, err
		}
	}
	return at, nil
}
