package settle

import (
	"context"
	"fmt"

	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// Per-stream read-ahead (issue 36). A flush reads its stream's locations
// in order, and behind S3's latency one ranged GET at a time settles a
// stream at one GET's pace (about 90 MB/s, 3 ms to the first byte in the
// bench's model), so a step with few streams fell behind a star at full
// speed. spanReader keeps up to readAheadGets spans of the next
// locations in flight behind the one build consumes, in order; their
// bytes, held or in flight, count against readAheadBytes for the whole
// Settler (every stream of every step at once), taken without waiting:
// a span that does not fit is not read ahead but when build reaches it,
// as before. So the memory a flush needs beyond the span it consumes is
// bounded by readAheadBytes for all of them together (128 MiB, as
// coalesce.go's spans in flight, beside a settle Lambda's 1,024 MiB
// window budget), and nothing waits for the budget (no deadlock).
//
// The spans and their bytes are the same as without the read-ahead; only
// when they are read changes, so the objects built are byte-identical.
const readAheadGets = 4

// readAheadBytes bounds the read-ahead's bytes per Settler (a variable
// for tests).
var readAheadBytes int64 = 128 << 20

// spanReader reads build's locations in order, a settled location with
// the settled locations that follow it back to back in the same object
// (a stream's segments in a pack, design 014 level 1) in one ranged GET
// of at most max bytes, so a flush costs a GET per run it reads, not per
// segment. A location pf holds (the step read it ahead, coalesced with
// other streams': coalesce.go) is taken from there, with segment's
// length check. It reads ahead (above). close must be called.
type spanReader struct {
	ctx    context.Context
	cancel context.CancelFunc
	s      *Settler
	set    chain.Set
	locs   []metastore.Location
	max    int64
	pf     *prefetched
	// reads: the reads planned, each of locs [first, first+n); planned:
	// the first location of none; cur: the read next() is in, started:
	// the reads started.
	reads   []*spanRead
	planned int
	cur     int
	started int
	at      int // the next location next returns
}

// spanRead is one read of spanReader: a GET of loc (a transit segment or
// a settled span) or a piece pf held (body set, done closed).
type spanRead struct {
	first, n int
	loc      metastore.Location
	piece    bool
	budget   int64 // readAheadBytes taken, given back when consumed
	done     chan struct{}
	body     []byte  // a settled span's or a piece's bytes
	seg      checked // a transit segment, checked
	err      error
}

func newSpanReader(ctx context.Context, s *Settler, set chain.Set, locs []metastore.Location, pf *prefetched) *spanReader {
	ctx, cancel := context.WithCancel(ctx)
	return &spanReader{ctx: ctx, cancel: cancel, s: s, set: set, locs: locs, max: orDefault(s.MaxObjectBytes, DefaultMaxObjectBytes), pf: pf}
}

// plan adds the read of the next locations, false when none is left.
func (r *spanReader) plan() bool {
	if r.planned == len(r.locs) {
		return false
	}
	i := r.planned
	l := r.locs[i]
	rd := &spanRead{first: i, n: 1, loc: l, done: make(chan struct{})}
	if l.Settled {
		if b, ok := r.pf.take(l.Key, l.Offset, l.Length); ok {
			rd.piece, rd.body = true, b
			close(rd.done)
		}
	}
	if l.Settled && !rd.piece {
		end := l.Offset + l.Length
		for _, m := range r.locs[i+1:] {
			if !m.Settled || m.Key != l.Key || m.Offset != end || end+m.Length-l.Offset > r.max {
				break
			}
			end += m.Length
			rd.n++
		}
		rd.loc.Length = end - l.Offset
	}
	r.reads = append(r.reads, rd)
	r.planned += rd.n
	return true
}

// start starts read i; ahead: only when its bytes fit the budget.
func (r *spanReader) start(i int, ahead bool) bool {
	rd := r.reads[i]
	if !rd.piece {
		if ahead {
			if r.s.ahead.Add(rd.loc.Length) > readAheadBytes {
				r.s.ahead.Add(-rd.loc.Length)
				return false
			}
			rd.budget = rd.loc.Length
		}
		go func() {
			if rd.loc.Settled {
				rd.body, rd.err = r.s.segment(r.ctx, rd.loc)
			} else {
				rd.seg, rd.err = r.s.transitSegment(r.ctx, r.set, rd.loc)
			}
			close(rd.done)
		}()
	}
	r.started++
	return true
}

// release gives read i's budget back and drops its bytes.
func (r *spanReader) release(i int) {
	rd := r.reads[i]
	<-rd.done
	r.s.ahead.Add(-rd.budget)
	rd.budget, rd.body, rd.seg = 0, nil, checked{}
}

// next returns the next location's segment, its CRC checked once: a
// transit one when it was read (transitSegment), a settled one here.
func (r *spanReader) next() (format.SegmentInfo, []byte, error) {
	b, seg, transit, err := r.read()
	switch {
	case err != nil:
		return format.SegmentInfo{}, nil, err
	case transit:
		return seg.info, seg.recs, nil
	}
	return r.s.parse(b)
}

// read returns the next location's bytes, or its segment as checked
// when it is a transit one.
func (r *spanReader) read() (b []byte, seg checked, transit bool, err error) {
	if r.at == len(r.locs) {
		return nil, checked{}, false, fmt.Errorf("read past the last of %d locations", len(r.locs))
	}
	if r.cur == len(r.reads) {
		r.plan()
	}
	if rd := r.reads[r.cur]; r.at == rd.first+rd.n { // past read cur
		r.release(r.cur)
		r.cur++
		if r.cur == len(r.reads) {
			r.plan()
		}
	}
	if r.started == r.cur {
		r.start(r.cur, false)
	}
	for r.started <= r.cur+readAheadGets && (r.started < len(r.reads) || r.plan()) {
		if !r.start(r.started, true) {
			break
		}
	}
	rd := r.reads[r.cur]
	<-rd.done
	if rd.err != nil {
		return nil, checked{}, false, rd.err
	}
	l := r.locs[r.at]
	r.at++
	switch {
	case !l.Settled:
		return nil, rd.seg, true, nil
	case rd.piece:
		if int64(len(rd.body)) != l.Length { // as segment checks a GET's
			return nil, checked{}, false, fmt.Errorf("read settled %s: %d of %d bytes: %w", l.Key, len(rd.body), l.Length, ErrMismatch)
		}
		return rd.body, checked{}, false, nil
	}
	off := l.Offset - rd.loc.Offset
	return rd.body[off : off+l.Length], checked{}, false, nil
}

// close stops the reads in flight and gives their budget back.
func (r *spanReader) close() {
	r.cancel()
	for i := r.cur; i < r.started; i++ {
		r.release(i)
	}
}
