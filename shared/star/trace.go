package star

import (
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// TraceKind names a step of a flight's life reported to Config.Trace.
type TraceKind uint8

const (
	// TraceCut: the flusher cut the flight from the pool and claimed its
	// slot (At is the cut time, taken before rendering); reported once
	// the bundle is rendered, before any copy's PUT starts.
	TraceCut TraceKind = iota + 1
	// TraceDurable: the W-th copy of the slot confirmed.
	TraceDurable
	// TraceRelease: the flight's acks released (in slot order).
	TraceRelease
)

// TraceEvent is one step of one flight, for benchmarks and diagnostics.
type TraceEvent struct {
	Kind  TraceKind
	Class metastore.Class
	Epoch uint64
	Slot  uint64
	At    time.Time
	// Bytes is the rendered object's size (TraceCut only).
	Bytes int
	// Batches are the flight's batches in cut order (TraceCut only): which
	// stream and first seq rode this slot. The slice is the callee's.
	Batches []TraceBatch
}

// TraceBatch identifies one batch of a flight.
type TraceBatch struct {
	Stream   format.StreamID
	FirstSeq uint64
	Records  int
}

// trace reports ev when Config.Trace is set. The hook is optional and costs
// one nil check when unset; when set it runs synchronously on the flusher
// and commit goroutines (TraceRelease with the loglet lock held), so it must
// be fast and must not call back into the star.
func (l *loglet) trace(kind TraceKind, f *flight, at time.Time) {
	tr := l.s.cfg.Trace
	if tr == nil {
		return
	}
	ev := TraceEvent{Kind: kind, Class: l.class, Epoch: f.epoch, Slot: f.slot, At: at}
	if kind == TraceCut {
		ev.Bytes = f.objLen
		ev.Batches = make([]TraceBatch, len(f.batches))
		for i, b := range f.batches {
			ev.Batches[i] = TraceBatch{Stream: b.st.id, FirstSeq: b.first, Records: b.recs}
		}
	}
	tr(ev)
}
