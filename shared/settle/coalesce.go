package settle

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// Coalesced flush reads (issue 17; design 014, "Left" 1). A step's age
// flush reads each flushed stream's entry of every live run: at steady
// state 83 small pieces a stream (60 minute runs' one-record segments and
// 23 hour runs' entries), one GET each on the per-stream path (build's
// spanReader). The flushed streams' pieces of one pack are close together
// (packs are in stream id order: 8,192 flushed of 1,000,000 streams are
// about 12 KB apart in a minute pack), so before the flushes the step
// reads the small pieces of every flushed stream by pack, neighbours
// coalesced into one ranged GET, and the flushes take their pieces from
// what it read (prefetched), reading the rest as before.
//
// The cost model behind the limits: a GET costs about 20 ms of latency
// and $0.0000004; transfer runs at about 100 MB/s, so a GET's latency is
// worth about 2 MB of transfer, and bytes moved inside a region cost
// nothing. A gap of at most coalesceGap (256 KiB: 2.6 ms) is read rather
// than split into another GET, an eighth of the break-even so that the
// bytes read stay within a few times the pieces' at the densities above;
// a span is at most coalesceSpan (8 MiB: 80 ms, a pack's size) so that
// coalescePar spans in flight hold at most 128 MiB (a buffer each,
// reused); a piece over
// coalescePiece (64 KiB) is read on its own as before (its GET's
// latency is small against its transfer). What the spans bring is
// copied out per piece (the span freed at once) into at most
// coalesceBytes (64 MiB) of pieces, so a settle Lambda (2,048 MiB, a
// 1,024 MiB window budget) holds them; the spans that save the most
// GETs per byte held are taken first, the pieces of the others are read
// one stream at a time, as before.
const (
	coalescePiece = 64 << 10
	coalesceGap   = 256 << 10
	coalesceSpan  = 8 << 20
	coalescePar   = 16
)

// coalesceBytes bounds the bytes of pieces a step holds (a variable for
// tests).
var coalesceBytes int64 = 64 << 20

// piece is one settled location's bytes: [off, off+n) of the object key.
type piece struct {
	key    string
	off, n int64
}

// span is one ranged GET of the coalesced reads: [off, off+n) of key,
// covering its pieces (at least 2, in offset order).
type span struct {
	key    string
	off, n int64
	pieces []piece
}

// held is the bytes of the pieces of sp (what its reads keep).
func (sp span) held() int64 {
	var n int64
	for _, p := range sp.pieces {
		n += p.n
	}
	return n
}

// coalesceLimits are planSpans' limits (the constants above, in a step).
type coalesceLimits struct {
	piece, gap, span, bytes int64
}

// planSpans groups the pieces of at most lim.piece bytes by object,
// sorted by offset, and coalesces neighbours into spans: the next piece
// joins a span when the gap before it is at most lim.gap and the span
// stays at most lim.span bytes. Only spans of 2 pieces or more are kept
// (a piece alone is read as before); of those, the ones that save the
// most GETs per byte of pieces held are taken while their pieces fit in
// lim.bytes. Duplicates count once. The spans are returned in (key,
// offset) order.
func planSpans(pieces []piece, lim coalesceLimits) []span {
	small := make([]piece, 0, len(pieces))
	for _, p := range pieces {
		if p.n > 0 && p.off >= 0 && p.n <= lim.piece {
			small = append(small, p)
		}
	}
	slices.SortFunc(small, func(a, b piece) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.off, b.off), cmp.Compare(a.n, b.n))
	})
	small = slices.Compact(small)
	var spans []span
	for i := 0; i < len(small); {
		sp := span{key: small[i].key, off: small[i].off, n: small[i].n}
		j := i + 1
		for ; j < len(small); j++ {
			p := small[j]
			end := sp.off + sp.n
			if p.key != sp.key || p.off-end > lim.gap || max(end, p.off+p.n)-sp.off > lim.span {
				break
			}
			sp.n = max(end, p.off+p.n) - sp.off
		}
		sp.pieces = small[i:j:j]
		if len(sp.pieces) >= 2 {
			spans = append(spans, sp)
		}
		i = j
	}
	// The most GETs saved per byte held first: (pieces-1)/held, compared
	// across (no rounding); ties in (key, offset) order.
	slices.SortStableFunc(spans, func(a, b span) int {
		return cmp.Compare(int64(len(b.pieces)-1)*a.held(), int64(len(a.pieces)-1)*b.held())
	})
	var taken []span
	var used int64
	for _, sp := range spans {
		if h := sp.held(); used+h <= lim.bytes {
			taken = append(taken, sp)
			used += h
		}
	}
	slices.SortFunc(taken, func(a, b span) int { return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.off, b.off)) })
	return taken
}

// prefetched is the pieces a step read in coalesced spans, each taken
// once by the flush that reads it (take). Safe for concurrent use; a nil
// *prefetched holds nothing.
type prefetched struct {
	mu     sync.Mutex
	pieces map[piece][]byte
	bytes  int64 // the bytes held
	spans  int   // spans read
}

// take returns the piece [off, off+n) of key and forgets it (a flush
// that reads it again, after a lost write, reads it by GET), or false
// when it holds no such piece.
func (p *prefetched) take(key string, off, n int64) ([]byte, bool) {
	if p == nil {
		return nil, false
	}
	k := piece{key: key, off: off, n: n}
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.pieces[k]
	if ok {
		delete(p.pieces, k)
		p.bytes -= int64(len(b))
	}
	return b, ok
}

// settledPieces is the settled locations of partsOf as pieces.
func settledPieces(partsOf [][]metastore.Ref) []piece {
	var out []piece
	for _, parts := range partsOf {
		for _, r := range parts {
			for _, l := range r.Locations {
				if l.Settled {
					out = append(out, piece{key: l.Key, off: l.Offset, n: l.Length})
				}
			}
		}
	}
	return out
}

// prefetch reads the spans planned for the settled pieces of partsOf
// (planSpans, the limits above) from the settled bucket, coalescePar at
// a time, and copies each piece out. A span that fails (its object gone:
// another copy merged it away; or any other error) is skipped: its
// pieces are read by the flushes one by one, whose reads report it as
// they did before (errGone, or the error with its context); so is a
// piece the span's bytes do not cover whole (the object is shorter than
// the location: the flush's read reports ErrMismatch). Checks of a
// piece's contents stay where they are (build: ParseSegment, its CRC).
func (s *Settler) prefetch(ctx context.Context, partsOf [][]metastore.Ref) *prefetched {
	if s.noCoalesce {
		return nil
	}
	spans := planSpans(settledPieces(partsOf), coalesceLimits{piece: coalescePiece, gap: coalesceGap, span: coalesceSpan, bytes: coalesceBytes})
	if len(spans) == 0 {
		return nil
	}
	pf := &prefetched{pieces: map[piece][]byte{}}
	var wg sync.WaitGroup
	// Each of the coalescePar reads in flight has a buffer of its own,
	// reused from span to span (objstore.GetInto): at most coalescePar x
	// coalesceSpan bytes of spans, and no garbage of them.
	bufs := make(chan []byte, coalescePar)
	for range coalescePar {
		bufs <- nil
	}
	for _, sp := range spans {
		if ctx.Err() != nil {
			break // the flushes report it
		}
		buf := <-bufs
		wg.Add(1)
		go func() {
			defer wg.Done()
			if int64(cap(buf)) < sp.n {
				buf = make([]byte, sp.n)
			}
			defer func() { bufs <- buf }()
			n, err := objstore.GetInto(ctx, s.Settled, sp.key, sp.off, buf[:sp.n])
			if err != nil {
				if !errors.Is(err, objstore.ErrNotFound) && ctx.Err() == nil {
					s.log().Warn("settle: coalesced read failed, its pieces read one by one", "key", sp.key, "offset", sp.off, "bytes", sp.n, "err", err)
				}
				return
			}
			body := buf[:n]
			got := make(map[piece][]byte, len(sp.pieces))
			var held int64
			for _, p := range sp.pieces {
				lo := p.off - sp.off
				if lo+p.n > int64(len(body)) {
					continue
				}
				got[p] = slices.Clone(body[lo : lo+p.n]) // the buffer is reused
				held += p.n
			}
			pf.mu.Lock()
			defer pf.mu.Unlock()
			maps.Copy(pf.pieces, got)
			pf.bytes += held
			pf.spans++
		}()
	}
	wg.Wait()
	s.log().Debug("settle: coalesced flush reads", "spans", len(spans), "read", pf.spans, "pieces", len(pf.pieces), "bytes", pf.bytes)
	return pf
}
