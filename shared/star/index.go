package star

import (
	"encoding/binary"
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
		return nil, 0, fmt.Errorf("%w: %s", ErrUnknownStream, id)
	}
	// Under the loglet lock (the write path's), only pick the batches the
	// window can need; decode them after unlocking. A released batch's
	// fields and encoded records never change, and the batch stays valid
	// after the absorb drops it from the index.
	l := st.l
	l.mu.Lock()
	low = st.ackedNext
	if len(st.indexed) > 0 {
		low = st.indexed[0].first
	}
	// The first batch that ends after from.
	i := sort.Search(len(st.indexed), func(i int) bool {
		b := st.indexed[i]
		return b.first+uint64(b.recs) > from
	})
	var window []*batch
	n, size := 0, 0
	for _, b := range st.indexed[i:] {
		if n >= maxRecords || (size >= maxBytes && n > 0) {
			break
		}
		window = append(window, b)
		n += int(b.first + uint64(b.recs) - max(from, b.first))
		if b.first >= from {
			size += len(b.enc) // a partial first batch counts 0: take one batch more, never one less
		}
	}
	l.mu.Unlock()
	if readIndexDecodeHook != nil {
		readIndexDecodeHook()
	}
	return decodeWindow(window, from, maxRecords, maxBytes), low, nil
}

// readIndexDecodeHook, if set (tests), runs where ReadIndex decodes.
var readIndexDecodeHook func()

// decodeWindow decodes the records of window with seq >= from, in seq
// order and contiguous, up to maxRecords records and maxBytes encoded bytes
// (at least one): it stops at the first record that does not fit.
func decodeWindow(window []*batch, from uint64, maxRecords, maxBytes int) []SeqRecord {
	var recs []SeqRecord
	size := 0
	for _, b := range window {
		seq := b.first
		for off := 0; off < len(b.enc); seq++ {
			if len(recs) >= maxRecords {
				return recs
			}
			n := 4 + int(binary.BigEndian.Uint32(b.enc[off:]))
			if seq >= from {
				if size+n > maxBytes && len(recs) > 0 {
					return recs
				}
				rs, err := format.DecodeRecords(b.enc[off:off+n], 1)
				if err != nil {
					panic(fmt.Sprintf("star: flight index holds an undecodable record: %v", err))
				}
				recs = append(recs, SeqRecord{Seq: seq, Record: rs[0]})
				size += n
			}
			off += n
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
		return 0, nil, fmt.Errorf("%w: %s", ErrUnknownStream, id)
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
	st.l.mu.Lock()
	defer st.l.mu.Unlock()
	if st.changed == nil {
		st.changed = make(chan struct{})
	}
	return st.ackedNext, st.changed, nil
}
