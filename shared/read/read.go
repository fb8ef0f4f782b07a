package read

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/star"
)

// Sentinel errors.
var (
	// ErrInvalid: a bad start or limit.
	ErrInvalid = errors.New("read: invalid argument")
	// ErrCorrupt: a settled object failed its check, or refs disagree with
	// the data they point to. Never normal.
	ErrCorrupt = errors.New("read: corrupt data")
)

// Default and maximum limits of one read.
const (
	MaxCount = 1000
	MaxBytes = 1 << 20
)

// Index is what a read needs from the leader star (a *star.Star).
type Index interface {
	Tail(id format.StreamID) (next uint64, lastTsMs int64, err error)
	ReadIndex(id format.StreamID, from uint64, maxRecords, maxBytes int) ([]star.SeqRecord, uint64, error)
	WatchStream(id format.StreamID) (tail uint64, changed <-chan struct{}, err error)
}

var _ Index = (*star.Star)(nil)

// Trims is what an Index that knows its streams' trim points also has
// (star.Star does): reads then never return a record below a stream's
// acknowledged trim point (explicit trim, the Trim command): a read that
// starts below it starts at it.
type Trims interface {
	Commands(id format.StreamID) (format.StreamCommands, error)
}

var _ Trims = (*star.Star)(nil)

// trimPoint is the stream's acknowledged trim point (0 when the Index does
// not know trim points).
func (r *Reader) trimPoint(id format.StreamID) (uint64, error) {
	t, ok := r.Star.(Trims)
	if !ok {
		return 0, nil
	}
	c, err := t.Commands(id)
	return c.TrimSeq, err
}

// retentionCutoff is the timestamp below which stream st's records are
// past its retention at now (0: it keeps them forever): its acknowledged
// config command's retention (the Index's Commands), or else the one it
// was created with (st.RetentionMs). Reads serve none of those records
// (ADR 0045): they are unreadable the moment they expire, though trim
// deletes them later.
func (r *Reader) retentionCutoff(st metastore.Stream, id format.StreamID) (int64, error) {
	ret := st.RetentionMs
	if t, ok := r.Star.(Trims); ok {
		c, err := t.Commands(id)
		if err != nil {
			return 0, err
		}
		if c.HasConfig {
			ret = c.Config.RetentionMs
		}
	}
	if ret <= 0 {
		return 0, nil
	}
	return clock.OrReal(r.Clock).Now().UnixMilli() - ret, nil
}

// Reader serves reads of the streams its star leads.
type Reader struct {
	Star Index
	Meta metastore.Store
	// Sets are the chain bucket sets per class (transit locations).
	Sets map[metastore.Class]chain.Set
	// Settled is the settled bucket (nil: no settled locations expected).
	Settled objstore.Bucket
	// Clock times heartbeats and retention (nil: the real clock).
	Clock clock.Clock
	// Transit finds the records the absorb indexed in pass indexes and no
	// ref holds yet (design 014; passindex.Window). nil: every absorbed
	// record is behind a ref.
	Transit Transit
	// AheadBudget bounds the read-ahead of all the sessions of this
	// Reader together (nil: a budget of DefaultAheadBudget of its own).
	AheadBudget *Budget
	// Cache holds the segments fetched by all the reads and sessions of
	// this Reader, shared (cache.go; nil: a cache of DefaultCacheBytes of
	// its own).
	Cache *SegmentCache
	// Metrics counts what reads and sessions serve (nil: nothing counted).
	Metrics *Metrics

	budgetOnce sync.Once
	budget     *Budget
	cacheOnce  sync.Once
	cache      *SegmentCache
}

// segmentCache is r.Cache, or r's own default one.
func (r *Reader) segmentCache() *SegmentCache {
	if r.Cache != nil {
		return r.Cache
	}
	r.cacheOnce.Do(func() { r.cache = NewSegmentCache(DefaultCacheBytes) })
	return r.cache
}

// Transit is the pass index window of a stream's chain (design 014).
type Transit interface {
	// QueryRefs is metastore.QueryRefs of st followed, where its refs
	// end, by its parts in the window, as refs with transit locations.
	QueryRefs(ctx context.Context, st metastore.Stream, from uint64, limit int) ([]metastore.Ref, error)
}

// refsFrom queries st's refs, and its parts in the pass index window when
// there is one (Transit). A hole between the two (settle moved the window
// between the two reads) is a torn view that the callers read again.
func (r *Reader) refsFrom(ctx context.Context, st metastore.Stream, from uint64, limit int) ([]metastore.Ref, error) {
	if r.Transit != nil {
		return r.Transit.QueryRefs(ctx, st, from, limit)
	}
	return r.Meta.QueryRefs(ctx, st.ID, from, limit)
}

// streamRefs is one stream's refs as the reader finds them (refsFrom: the
// metastore's refs, then the pass index window), for seekTimestamp.
type streamRefs struct {
	r  *Reader
	st metastore.Stream
}

func (q streamRefs) QueryRefs(ctx context.Context, _ string, from uint64, limit int) ([]metastore.Ref, error) {
	return q.r.refsFrom(ctx, q.st, from, limit)
}

// StartKind selects how a read's start is given.
type StartKind uint8

const (
	FromSeq StartKind = iota
	FromTimestamp
	FromTailOffset
)

// Start is where a read begins.
type Start struct {
	Kind       StartKind
	Seq        uint64
	TsMs       int64
	TailOffset uint64
}

// Limits bound a read. Zero fields take the defaults (MaxCount, MaxBytes).
type Limits struct {
	Count int
	Bytes int
}

func (l Limits) norm() (Limits, error) {
	if l.Count < 0 || l.Bytes < 0 {
		return l, fmt.Errorf("%w: negative limit (count %d, bytes %d)", ErrInvalid, l.Count, l.Bytes)
	}
	if l.Count == 0 || l.Count > MaxCount {
		l.Count = MaxCount
	}
	if l.Bytes == 0 || l.Bytes > MaxBytes {
		l.Bytes = MaxBytes
	}
	return l, nil
}

// Result is one read's records and the stream's tail when it was served.
type Result struct {
	Records  []star.SeqRecord
	Tail     uint64
	LastTsMs int64
	// Next is where a following read continues: after the last record
	// returned or skipped by the timestamp filter.
	Next uint64
}

// Read reads st from start within lim (see the package documentation).
func (r *Reader) Read(ctx context.Context, st metastore.Stream, start Start, lim Limits) (Result, error) {
	lim, err := lim.norm()
	if err != nil {
		return Result{}, err
	}
	id, err := format.ParseStreamID(st.ID)
	if err != nil {
		return Result{}, fmt.Errorf("read %s: %w", st.Name, err)
	}
	tail, lastTs, err := r.Star.Tail(id)
	if err != nil {
		return Result{}, err
	}
	from, minTs, err := r.resolve(ctx, st, id, start, tail, lastTs)
	if err != nil {
		return Result{}, err
	}
	res, err := r.readFrom(ctx, st, id, from, minTs, lim, true)
	if err != nil {
		return Result{}, err
	}
	r.Metrics.served(res.Records)
	return res, nil
}

// resolve turns a start into a first seq (clamped to the tail) and a
// timestamp filter.
func (r *Reader) resolve(ctx context.Context, st metastore.Stream, id format.StreamID, start Start, tail uint64, lastTs int64) (uint64, int64, error) {
	switch start.Kind {
	case FromSeq:
		return min(start.Seq, tail), 0, nil
	case FromTailOffset:
		return tail - min(start.TailOffset, tail), 0, nil
	case FromTimestamp:
		if tail == 0 || lastTs < start.TsMs {
			return tail, 0, nil
		}
		// Skip whole refs that end before T (a search, seek.go); the rest
		// is filtered by timestamp as it is read.
		from, err := seekTimestamp(ctx, streamRefs{r, st}, st.ID, tail, start.TsMs)
		if err != nil {
			return 0, 0, fmt.Errorf("read %s from timestamp %d: %w", st.Name, start.TsMs, err)
		}
		return from, start.TsMs, nil
	}
	return 0, 0, fmt.Errorf("%w: unknown start kind %d", ErrInvalid, start.Kind)
}

// readFrom reads from seq from, records with timestamp >= minTs only, and
// none past the stream's retention; with seek, it first skips the whole
// refs past the retention (a Read, a session until it has sent records).
func (r *Reader) readFrom(ctx context.Context, st metastore.Stream, id format.StreamID, from uint64, minTs int64, lim Limits, seek bool) (Result, error) {
	lim, err := lim.norm()
	if err != nil {
		return Result{}, err
	}
	// Records past the stream's retention are not served: a timestamp
	// filter from the cutoff, and one seek past the whole refs before it
	// (seekTimestamp) the first time the read reaches below the flight
	// index, so an expired prefix not yet trimmed is skipped, not read.
	cutoff, err := r.retentionCutoff(st, id)
	if err != nil {
		return Result{}, err
	}
	sought := !seek || cutoff <= minTs
	minTs = max(minTs, cutoff)
	var out []star.SeqRecord
	size := 0
	full := func() bool { return len(out) >= lim.Count || (len(out) > 0 && size >= lim.Bytes) }
	add := func(rec star.SeqRecord) bool {
		n := format.MeteredSize(rec.Record)
		if len(out) >= lim.Count || (len(out) > 0 && size+n > lim.Bytes) {
			return false
		}
		if rec.TimestampMs >= minTs {
			out = append(out, rec)
			size += n
		}
		return true
	}
	for !full() {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		tail, _, err := r.Star.Tail(id)
		if err != nil {
			return Result{}, err
		}
		if from >= tail {
			break
		}
		// Below the acknowledged trim point nothing is served: the read
		// goes on from it (looked up on every pass, so a session that
		// started before a trim skips what the trim removed).
		trim, err := r.trimPoint(id)
		if err != nil {
			return Result{}, err
		}
		if from < trim {
			from = min(trim, tail)
			continue
		}
		idx, low, err := r.Star.ReadIndex(id, from, lim.Count-len(out), max(lim.Bytes-size, 1))
		if err != nil {
			return Result{}, err
		}
		if from >= low {
			if len(idx) == 0 {
				break
			}
			if len(out) == 0 && minTs == 0 {
				// The index kept within the limits: take its slice whole
				// (no copy, no per-record checks) and continue after it.
				out = idx
				for _, rec := range idx {
					size += format.EncodedSize(rec.Record)
				}
				from = idx[len(idx)-1].Seq + 1
				continue
			}
			stop := false
			for _, rec := range idx {
				if !add(rec) {
					stop = true
					break
				}
				from = rec.Seq + 1
			}
			if stop {
				break
			}
			continue
		}
		if !sought {
			sought = true
			past, err := seekTimestamp(ctx, streamRefs{r, st}, st.ID, tail, cutoff)
			if err != nil {
				return Result{}, fmt.Errorf("read %s past its retention (timestamp %d): %w", st.Name, cutoff, err)
			}
			if past > from {
				from = past
				continue
			}
		}
		next, stop, err := r.fromRefs(ctx, st, id, from, low, add)
		if err != nil {
			return Result{}, err
		}
		from = next
		if stop {
			break
		}
	}
	tail, lastTs, err := r.Star.Tail(id)
	if err != nil {
		return Result{}, err
	}
	return Result{Records: out, Tail: tail, LastTsMs: lastTs, Next: from}, nil
}

// tornRetries bounds how many times a read re-queries refs that leave a
// hole the stream's first ref does not explain (after 1, 2, ... ms), before
// it gives up with metastore.ErrUnavailable (it never skips the hole).
const tornRetries = 8

// errTorn: the refs read leave a hole at from that is not a trim. A torn
// view (DynamoDB has no snapshot across Queries, nor across the pages of
// one) or a trim in progress; read them again.
var errTorn = errors.New("read: refs leave a hole")

// fromRefs reads [from, low) from refs through add until add refuses. It
// returns the next seq to read and whether add refused.
func (r *Reader) fromRefs(ctx context.Context, st metastore.Stream, id format.StreamID, from, low uint64, add func(star.SeqRecord) bool) (uint64, bool, error) {
	vanished, torn := 0, 0
	for {
		next, stop, err := r.refsOnce(ctx, st, id, from, low, add)
		if err != nil {
			aheadOf(ctx).forgetRefs() // ahead.go: the retry re-queries (a torn view, a vanished location)
		}
		switch {
		case next > from || stop || err == nil:
			if err != nil && next > from {
				err = nil // serve what was read; the next call retries
			}
			return next, stop, err
		case errors.Is(err, errTorn) && torn < tornRetries:
			torn++
			// Let the write that tore the view (a merge, a trim) finish.
			clock.OrReal(r.Clock).Sleep(time.Duration(torn) * time.Millisecond)
		case errors.Is(err, errTorn):
			return from, false, fmt.Errorf("read %s: %w: the refs from %d stayed inconsistent over %d queries: retry",
				st.Name, metastore.ErrUnavailable, from, tornRetries+1)
		case errors.Is(err, objstore.ErrNotFound) && vanished < 3:
			vanished++ // a location vanished: read fresh refs
		default:
			return next, stop, err
		}
	}
}

// refsOnce reads from one query of refs. It reads only refs that continue
// from without a hole: where the next ref starts past from it stops (when
// it read something: the next query starts at the hole), or asks trimmed
// whether the hole is below the stream's first ref.
func (r *Reader) refsOnce(ctx context.Context, st metastore.Stream, id format.StreamID, from, low uint64, add func(star.SeqRecord) bool) (uint64, bool, error) {
	refs, err := r.queryRefs(ctx, st, from, 8) // ahead.go
	if err != nil {
		return from, false, fmt.Errorf("read %s: query refs from %d: %w", st.Name, from, err)
	}
	start := from
	aheadOf(ctx).plan(refs, from) // ahead.go: read-ahead of a session
	for _, ref := range refs {
		if from >= low {
			return from, false, nil
		}
		if ref.LastSeq < from {
			continue // overlaps what was read (a torn view): nothing new
		}
		if ref.FirstSeq > from {
			if from > start {
				return from, false, nil
			}
			return r.trimmed(ctx, st, from, low)
		}
		for li, loc := range ref.Locations {
			if li+1 < len(ref.Locations) {
				// A location that ends before from is skipped unread.
				if next := ref.Locations[li+1].FirstSeq; next > 0 && next <= from {
					continue
				}
			}
			info, recs, err := r.load(ctx, st, id, loc) // ahead.go
			if err != nil {
				return from, false, err
			}
			for i, rec := range recs {
				seq := info.FirstSeq + uint64(i)
				if seq < from {
					continue
				}
				if seq != from {
					return from, false, fmt.Errorf("read %s: %w: ref %d..%d: segment in %s gives seq %d where %d was due",
						st.Name, ErrCorrupt, ref.FirstSeq, ref.LastSeq, loc.Key, seq, from)
				}
				if seq >= low {
					return from, false, nil
				}
				if !add(star.SeqRecord{Seq: seq, Record: rec}) {
					return from, true, nil
				}
				from = seq + 1
			}
		}
		if from <= ref.LastSeq {
			return from, false, fmt.Errorf("read %s: %w: ref %d..%d ends at %d", st.Name, ErrCorrupt, ref.FirstSeq, ref.LastSeq, from)
		}
	}
	if from == start && from < low {
		return r.trimmed(ctx, st, from, low) // no ref holds from
	}
	return from, false, nil
}

// trimmed decides a hole at from that one query of refs showed, by a
// second read: the stream's first ref (one item: the lowest key, which a
// merge never removes, since SwapRefs stores the merged ref at its first
// ref's key; with no ref, its first part in the pass index window). Seqs below it are trimmed (or the stream is gone): the read
// goes on from it, or from low when no ref is left. A first ref at or below
// from means the hole was a torn view: errTorn, read again.
func (r *Reader) trimmed(ctx context.Context, st metastore.Stream, from, low uint64) (uint64, bool, error) {
	first, err := r.refsFrom(ctx, st, 0, 1)
	if err != nil {
		return from, false, fmt.Errorf("read %s: query the first ref: %w", st.Name, err)
	}
	if len(first) == 0 {
		return low, false, nil
	}
	if f := first[0].FirstSeq; f > from {
		return min(f, low), false, nil
	}
	return from, false, fmt.Errorf("%w at %d (the first ref starts at %d)", errTorn, from, first[0].FirstSeq)
}

// segment fetches one location's segment and decodes it, checked (its
// CRC, its records, its stream), once: a transit copy is decoded by the
// chain set's check of it, so a corrupt copy falls through to the next
// and the one that answers is not decoded (nor its CRC computed) again.
// prefetch: no read waits for it yet (read-ahead), so a transit GET is
// hedged late (see prefetchHedge).
func (r *Reader) segment(ctx context.Context, st metastore.Stream, id format.StreamID, loc metastore.Location, prefetch bool) (format.SegmentInfo, []format.Record, error) {
	decode := func(b []byte) (format.SegmentInfo, []format.Record, error) {
		info, recs, err := format.DecodeSegment(b)
		if err != nil {
			return info, nil, err
		}
		if info.Stream != id {
			return info, nil, fmt.Errorf("segment of stream %s, want %s: %w", info.Stream, id, ErrCorrupt)
		}
		return info, recs, nil
	}
	if loc.Settled {
		if r.Settled == nil {
			return format.SegmentInfo{}, nil, fmt.Errorf("read %s: settled location %s but no settled bucket is configured", st.Name, loc.Key)
		}
		b, err := getParts(ctx, r.Settled, loc.Key, loc.Offset, loc.Length)
		if err != nil {
			return format.SegmentInfo{}, nil, fmt.Errorf("read %s: get %s: %w", st.Name, loc.Key, err)
		}
		info, recs, err := decode(b)
		if err != nil {
			return info, nil, fmt.Errorf("read %s: settled %s: %w: %w", st.Name, loc.Key, ErrCorrupt, err)
		}
		return info, recs, nil
	}
	set, ok := r.Sets[st.Class]
	if !ok {
		return format.SegmentInfo{}, nil, fmt.Errorf("read %s: no %s bucket set configured", st.Name, st.Class)
	}
	if set.Hedge == 0 {
		set.Hedge = hedgeFor(loc.Length)
		if prefetch {
			set.Hedge += prefetchHedge
		}
	}
	// The check decodes each copy it is given; the decoded copies are
	// kept by their bytes' address, to take the winner's.
	type decoded struct {
		info format.SegmentInfo
		recs []format.Record
	}
	var mu sync.Mutex
	copies := map[*byte]decoded{}
	check := func(b []byte) error {
		info, recs, err := decode(b)
		if err != nil {
			return err
		}
		mu.Lock()
		copies[unsafe.SliceData(b)] = decoded{info, recs}
		mu.Unlock()
		return nil
	}
	b, err := set.ReadRange(ctx, loc.Key, loc.Offset, loc.Length, check)
	if err != nil {
		return format.SegmentInfo{}, nil, fmt.Errorf("read %s: %w", st.Name, err)
	}
	mu.Lock()
	d, ok := copies[unsafe.SliceData(b)]
	mu.Unlock()
	if !ok { // ReadRange returned a copy its check did not pass: never
		return format.SegmentInfo{}, nil, fmt.Errorf("read %s: %s: an unchecked copy: %w", st.Name, loc.Key, ErrCorrupt)
	}
	return d.info, d.recs, nil
}

// hedgeMBps is the bandwidth a transit GET is given before the chain set
// asks a second copy: the hedge waits chain.DefaultHedge plus the body's
// time at it. A fixed 20 ms hedged every 1 MiB GET still streaming at
// 90 MB/s (11 ms of body after a first byte of up to 10 ms), and with 16
// GETs in flight per session the second copies made 1.6 bytes fetched per
// byte read.
const hedgeMBps = 50

// prefetchHedge is added to the hedge of a transit GET that no read waits
// on yet (read-ahead): a second copy is asked for only when the first is
// stuck, not merely slower than the hedge. A hedge is timed, and on a
// machine short of CPU the timer fired while the first copy's answer
// waited to be scheduled: through the API (3 to 4 times the CPU per GiB of
// the in-process read) the catch-up fetched 1.47 bytes per byte read,
// each extra byte a second copy of a GET that had answered. With 16
// read-ahead GETs in flight, a read seldom waits on a GET just started;
// the one it waits on (the first location of a plan, or one it fetches
// itself) keeps the short hedge.
const prefetchHedge = time.Second

func hedgeFor(length int64) time.Duration {
	return chain.DefaultHedge + time.Duration(float64(length)/(hedgeMBps*1e6)*float64(time.Second))
}

// Batch is one message of a session: records (none in a heartbeat) and the
// tail.
type Batch struct {
	Records   []star.SeqRecord
	Tail      uint64
	LastTsMs  int64
	Heartbeat bool
}

// SessionOptions configure a session.
type SessionOptions struct {
	// Count and Bytes bound the whole session (0: unbounded).
	Count uint64
	Bytes uint64
	// NoTail ends the session at the tail instead of following it.
	NoTail bool
	// Heartbeat is the idle interval between heartbeats (0: 5 s).
	Heartbeat time.Duration
}

// Session reads st from start and then follows the tail, calling send for
// every batch of records and every heartbeat, until ctx ends, send fails, a
// limit is reached (nil), or, with NoTail, the tail is reached (nil).
func (r *Reader) Session(ctx context.Context, st metastore.Stream, start Start, opt SessionOptions, send func(Batch) error) error {
	id, err := format.ParseStreamID(st.ID)
	if err != nil {
		return fmt.Errorf("read %s: %w", st.Name, err)
	}
	hb := opt.Heartbeat
	if hb <= 0 {
		hb = 5 * time.Second
	}
	clk := clock.OrReal(r.Clock)
	tail, lastTs, err := r.Star.Tail(id)
	if err != nil {
		return err
	}
	from, minTs, err := r.resolve(ctx, st, id, start, tail, lastTs)
	if err != nil {
		return err
	}
	ctx, stop := r.withAhead(ctx, st, id) // ahead.go
	defer stop()
	var sentN, sentB uint64
	seek := true // past the retention, once (readFrom)
	// A heartbeat is due hb after the last message sent, whatever wakes
	// the session in between.
	lastSent := clk.Now()
	for {
		lim := Limits{}
		if opt.Count > 0 {
			lim.Count = int(min(opt.Count-sentN, MaxCount))
		}
		if opt.Bytes > 0 {
			lim.Bytes = int(min(opt.Bytes-sentB, MaxBytes))
		}
		// Watch before reading, so that a release between the read and
		// the wait is not missed.
		_, changed, err := r.Star.WatchStream(id)
		if err != nil {
			return err
		}
		res, err := r.readFrom(ctx, st, id, from, minTs, lim, seek)
		if err != nil {
			return err
		}
		from = res.Next
		if n := len(res.Records); n > 0 {
			minTs = 0 // timestamps are non-decreasing: the filter is done
			seek = false
			sentN += uint64(n)
			for _, rec := range res.Records {
				sentB += uint64(format.MeteredSize(rec.Record))
			}
			if err := send(Batch{Records: res.Records, Tail: res.Tail, LastTsMs: res.LastTsMs}); err != nil {
				return err
			}
			r.Metrics.served(res.Records)
			lastSent = clk.Now()
			if (opt.Count > 0 && sentN >= opt.Count) || (opt.Bytes > 0 && sentB >= opt.Bytes) {
				return nil
			}
			continue
		}
		if from < res.Tail {
			continue // acked since the read looked
		}
		if opt.NoTail {
			return nil
		}
		if due := hb - clk.Now().Sub(lastSent); due > 0 {
			r.Metrics.waited()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-changed:
				continue
			case <-clk.After(due):
			}
		}
		if err := send(Batch{Tail: res.Tail, LastTsMs: res.LastTsMs, Heartbeat: true}); err != nil {
			return err
		}
		lastSent = clk.Now()
	}
}
