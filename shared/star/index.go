package star

import (
	"fmt"
	"sort"

	"github.com/strandlog/strand/shared/format"
)

// SeqRecord is a record with its seq number.
type SeqRecord struct {
	Seq uint64
	format.Record
}

// ReadIndex serves a stream's tail window from the flight index: acked
// records with seq >= from, in seq order, up to maxRecords records and
// maxBytes encoded bytes (at least one record when any is available). low
// is the lowest seq of this stream the index holds (or the acked tail if it
// holds none): records below low have been absorbed and must be read from
// refs, which are guaranteed to cover them. Records alias star memory that
// is never modified; callers must not modify them.
func (s *Star) ReadIndex(id format.StreamID, from uint64, maxRecords, maxBytes int) (recs []SeqRecord, low uint64, err error) {
	s.mu.RLock()
	st := s.streams[id]
	s.mu.RUnlock()
	if st == nil {
		return nil, 0, s.unknown(id)
	}
	// From the stream's view (no lock: the write path publishes views).
	// A released batch's fields and encoded records never change, and the
	// batch stays valid after the absorb drops it from the index.
	v := st.current()
	low = v.next
	if len(v.indexed) > 0 {
		low = v.indexed[0].first
	}
	// The first batch that ends after from.
	i := sort.Search(len(v.indexed), func(i int) bool {
		b := v.indexed[i]
		return b.first+uint64(b.recs) > from
	})
	return decodeWindow(v.indexed[i:], from, maxRecords, maxBytes), low, nil
}

// decoded is a batch's records, decoded once for every reader of the
// flight index (100 sessions tailing one stream decode each batch once, not
// 100 times), with each record's end in the batch's metered bytes (the
// sum of format.MeteredSize up to and including it: what read limits
// count, as the 1 MiB record limit does).
type decoded struct {
	recs []SeqRecord
	ends []int
}

// decoded returns b's records, decoding them at the first call. Two
// readers racing decode twice and keep one; the result never changes.
func (b *batch) decoded() *decoded {
	if d := b.dec.Load(); d != nil {
		return d
	}
	rs, err := format.DecodeRecords(b.enc, b.recs)
	if err != nil {
		panic(fmt.Sprintf("star: flight index holds an undecodable batch: %v", err))
	}
	d := &decoded{recs: make([]SeqRecord, len(rs)), ends: make([]int, len(rs))}
	sum := 0
	for i, r := range rs {
		d.recs[i] = SeqRecord{Seq: b.first + uint64(i), Record: r}
		sum += format.MeteredSize(r)
		d.ends[i] = sum
	}
	if !b.dec.CompareAndSwap(nil, d) {
		return b.dec.Load()
	}
	return d
}

// decodeWindow returns the records of window with seq >= from, in seq
// order and contiguous, up to maxRecords records and maxBytes metered bytes
// (at least one): it stops at the first record that does not fit. The
// records are the batches' shared decoded records (a window within one
// batch is a capped slice of them; a longer one, a copy), whose bodies
// alias the batches' encodings: callers must not modify them.
func decodeWindow(window []*batch, from uint64, maxRecords, maxBytes int) []SeqRecord {
	var recs []SeqRecord
	size := 0
	for _, b := range window {
		d := b.decoded()
		i := 0
		if from > b.first {
			i = int(from - b.first)
		}
		start := 0
		if i > 0 {
			start = d.ends[i-1]
		}
		j := i
		for j < len(d.recs) && len(recs)+(j-i) < maxRecords {
			n := d.ends[j] - start
			if n > maxBytes-size && (len(recs) > 0 || j > i) {
				break
			}
			j++
		}
		if j > i {
			if recs == nil && (j < len(d.recs) || len(window) == 1) {
				// All from one batch (a tailing reader's usual window):
				// the shared records themselves, capped so that an
				// append copies them instead of writing into the cache.
				return d.recs[i:j:j]
			}
			if recs == nil {
				recs = make([]SeqRecord, 0, min(maxRecords, len(d.recs)-i+b.recs*(len(window)-1)))
			}
			size += d.ends[j-1] - start
			recs = append(recs, d.recs[i:j]...)
		}
		if j < len(d.recs) {
			return recs
		}
	}
	return recs
}

// Watch returns a stream's acked tail and a channel closed at the loglet's
// next state change (a release among others), for read sessions that tail.
func (s *Star) Watch(id format.StreamID) (tail uint64, changed <-chan struct{}, err error) {
	s.mu.RLock()
	st := s.streams[id]
	s.mu.RUnlock()
	if st == nil {
		return 0, nil, s.unknown(id)
	}
	st.l.mu.Lock()
	defer st.l.mu.Unlock()
	return st.ackedNext, st.l.watch(), nil
}

// WatchStream is Watch for one stream: the channel is closed when this
// stream's acked tail moves (or Drain takes it off the star), not on the
// loglet's other changes, so a reader of an idle stream does no work for
// the appends of the class's other streams. A halt or Close does not close
// it: a reader waiting on it also keeps a timer (its heartbeat).
func (s *Star) WatchStream(id format.StreamID) (tail uint64, changed <-chan struct{}, err error) {
	st, err := s.stream(id)
	if err != nil {
		return 0, nil, err
	}
	// See moved: set watched, then check the view is still current.
	for {
		v := st.current()
		v.w.watched.Store(true)
		if !v.stale.Load() {
			return v.next, v.w.ch, nil
		}
	}
}
