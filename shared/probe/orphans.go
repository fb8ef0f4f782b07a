package probe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
)

// DefaultOrphanGrace is how long a settled object stays a deletable orphan
// before the sweep deletes it, by default: far longer than any settle step
// (which writes an object and swaps its refs within seconds), so an orphan
// is deleted only after many sweeps have found it unreferenced.
const DefaultOrphanGrace = 24 * time.Hour

// MarkPrefix is where the sweep keeps, in the settled bucket, one marker
// per deletable orphan: MarkPrefix + the orphan's key, holding the unix
// milliseconds at which a sweep first found it deletable. It is outside
// streams/, so markers are never taken for settled objects.
const MarkPrefix = "probe/orphans/"

// collect reports the orphans under streams/ and deletes the deletable
// ones whose marker is at least OrphanGrace old:
//
//  1. List streams/ and find the orphans (findOrphans: no ref names the
//     object, and Deletable: no ref overlapping its seqs is in transit).
//  2. A deletable orphan without a marker gets one (PutIfAbsent, now from
//     the injected clock); one whose marker is OrphanGrace old or more is
//     deleted, then its marker.
//  3. A marker whose object is no longer a deletable orphan (a ref points
//     to it again, or a transit ref overlaps it, or it is gone) is deleted:
//     the grace restarts if it ever becomes an orphan again.
//
// The decision to delete is taken on refs read in this very sweep, and it
// cannot be invalidated afterwards: only settle swaps a ref to a settled
// object, only from transit refs of its range, and its swap is conditional
// on those refs being unchanged; a deletable orphan has none. With the
// pass index (PassIndex, design 014) settle writes refs from a chain's
// window, conditioned on the settled cursor, so the stream's parts in
// every served chain's window count as transit refs, read before the refs
// (passindex.Window.ChainsLookup). A negative OrphanGrace only reports.
func (h *Handler) collect(ctx context.Context, rep *SweepReport) error {
	keys, err := h.Settled.List(ctx, SettledPrefix)
	if err != nil {
		return fmt.Errorf("probe: list settled objects: %w", err)
	}
	lookup := RefLookup(h.Meta.QueryRefs)
	if !h.PassIndex {
		// Without the switch the windows' parts would not count as in
		// transit: refuse a chain whose passes are indexed.
		for c := range h.Sets {
			hd, err := h.Meta.GetHead(ctx, c)
			if err != nil && !errors.Is(err, metastore.ErrNotFound) {
				return fmt.Errorf("probe: head of chain %s: %w", c, err)
			}
			if !hd.Indexed.IsZero() {
				return absorb.IndexedErr("probe (orphan sweep)", c, hd.Indexed)
			}
		}
	}
	if h.PassIndex {
		chains := slices.SortedFunc(maps.Keys(h.Sets), func(a, b metastore.ChainID) int { return strings.Compare(a.String(), b.String()) })
		w := h.Window
		if w == nil {
			w = &passindex.Window{Meta: h.Meta, Bucket: h.Settled}
		}
		lookup = w.ChainsLookup(chains)
	}
	orphans, unparsed, err := findOrphans(ctx, keys, lookup)
	if err != nil {
		return err
	}
	rep.OrphanCount = len(orphans)
	for _, o := range orphans[:min(len(orphans), MaxReported)] {
		rep.Orphans = append(rep.Orphans, o.Key)
	}
	rep.Unparsed = unparsed[:min(len(unparsed), MaxReported)]
	grace := h.OrphanGrace
	if grace == 0 {
		grace = DefaultOrphanGrace
	}
	var marks []string
	if grace >= 0 {
		if marks, err = h.Settled.List(ctx, MarkPrefix); err != nil {
			return fmt.Errorf("probe: list orphan markers: %w", err)
		}
	}
	if len(orphans) > 0 || len(unparsed) > 0 {
		// A warning when there is news: an orphan not marked yet (found
		// by this sweep) or a key that does not parse. Orphans already
		// marked wait out their grace at debug, or strand dev, which
		// sweeps every 30 s, would repeat the warning for a day.
		level := slog.LevelDebug
		if len(unparsed) > 0 || !allMarked(orphans, marks) {
			level = slog.LevelWarn
		}
		h.log().Log(ctx, level, "probe: settled objects no ref points to",
			"count", len(orphans), "keys", rep.Orphans, "unparsed", rep.Unparsed)
	}
	if grace < 0 {
		return nil
	}
	deletable := map[string]bool{}
	for _, o := range orphans {
		if o.Deletable {
			deletable[o.Key] = true
		}
	}
	marked := map[string]bool{}
	now := clock.OrReal(h.Clock).Now()
	var errs []error
	for _, mk := range marks {
		key := strings.TrimPrefix(mk, MarkPrefix)
		if !deletable[key] {
			if err := h.Settled.Delete(ctx, mk); err != nil {
				errs = append(errs, fmt.Errorf("probe: delete stale marker %s: %w", mk, err))
			}
			continue
		}
		marked[key] = true
		since, err := h.markTime(ctx, mk)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if now.Sub(since) < grace {
			continue
		}
		if err := h.Settled.Delete(ctx, key); err != nil {
			errs = append(errs, fmt.Errorf("probe: delete orphan %s: %w", key, err))
			continue
		}
		rep.OrphansDeleted = append(rep.OrphansDeleted, key)
		h.log().Info("probe: orphan deleted", "key", key, "orphan since", since)
		if err := h.Settled.Delete(ctx, mk); err != nil {
			errs = append(errs, fmt.Errorf("probe: delete marker %s: %w", mk, err))
		}
	}
	for _, o := range orphans {
		if !o.Deletable || marked[o.Key] {
			continue
		}
		body := []byte(strconv.FormatInt(now.UnixMilli(), 10))
		if err := h.Settled.PutIfAbsent(ctx, MarkPrefix+o.Key, body); err != nil && !errors.Is(err, objstore.ErrExists) {
			errs = append(errs, fmt.Errorf("probe: mark orphan %s: %w", o.Key, err))
		}
	}
	return errors.Join(errs...)
}

// allMarked reports whether every deletable orphan has a marker (a sweep
// before this one found it). Orphans that are not deletable overlap a
// transit ref: settle may be about to point to them.
func allMarked(orphans []Orphan, marks []string) bool {
	has := make(map[string]bool, len(marks))
	for _, mk := range marks {
		has[strings.TrimPrefix(mk, MarkPrefix)] = true
	}
	for _, o := range orphans {
		if o.Deletable && !has[o.Key] {
			return false
		}
	}
	return true
}

// maxMarkBytes bounds a marker's body: a decimal int64.
const maxMarkBytes = 20

// markTime reads when a marker's orphan was first found deletable. A
// marker that does not parse counts as set now (its grace starts over),
// rewritten by the next sweep after this one deletes it.
func (h *Handler) markTime(ctx context.Context, mk string) (time.Time, error) {
	b, err := h.Settled.Get(ctx, mk, 0, maxMarkBytes)
	if err != nil {
		return time.Time{}, fmt.Errorf("probe: read marker %s: %w", mk, err)
	}
	ms, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || ms < 0 {
		h.log().Warn("probe: malformed orphan marker; deleted, the grace starts over", "key", mk)
		if err := h.Settled.Delete(ctx, mk); err != nil {
			return time.Time{}, fmt.Errorf("probe: delete malformed marker %s: %w", mk, err)
		}
		return clock.OrReal(h.Clock).Now(), nil
	}
	return time.UnixMilli(ms), nil
}
