package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrEvent: an event that does not parse or names no valid chain.
	// Redelivering it cannot help.
	ErrEvent = errors.New("probe: malformed event")
	// ErrUnknownChain: a chain the handler has no bucket set for.
	ErrUnknownChain = errors.New("probe: no bucket set for chain")
	// ErrNotFenced: the epoch is not (yet) fenced in the metastore; nothing
	// is deleted. A retry may succeed once the fence is recorded.
	ErrNotFenced = errors.New("probe: epoch not fenced")
	// ErrCutMismatch: the event's cut is not the cut the metastore holds for
	// the epoch. Nothing is deleted: a wrong cut could point below committed
	// slots.
	ErrCutMismatch = errors.New("probe: cut differs from the epoch record")
	// ErrCutNotDead: the slot at the cut is not dead in the buckets; nothing
	// is deleted.
	ErrCutNotDead = errors.New("probe: cut slot is not dead")
	// ErrSetMismatch: the epoch was minted with other buckets than the
	// handler's set for its chain.
	ErrSetMismatch = errors.New("probe: bucket set differs from the epoch record")
)

// FenceEvent names one fenced epoch of one chain: the probe deletes the
// flight copies in slots [Cut, Cut+Window). Window is informational: the
// minted window on the epoch record is what bounds the probe.
//
//	{"star":"star-0","class":"express","epoch":3,"cut":17,"window":32}
type FenceEvent struct {
	Star   string `json:"star"`
	Class  string `json:"class"`
	Epoch  uint64 `json:"epoch"`
	Cut    uint64 `json:"cut"`
	Window int    `json:"window"`
}

// ParseFenceEvent decodes and checks a fence event.
func ParseFenceEvent(b []byte) (FenceEvent, error) {
	var e FenceEvent
	if err := json.Unmarshal(b, &e); err != nil {
		return FenceEvent{}, fmt.Errorf("%w: %v", ErrEvent, err)
	}
	if _, err := e.Chain(); err != nil {
		return FenceEvent{}, err
	}
	if e.Epoch == 0 || e.Window < 0 {
		return FenceEvent{}, fmt.Errorf("%w: epoch %d window %d", ErrEvent, e.Epoch, e.Window)
	}
	return e, nil
}

// Chain is the event's chain.
func (e FenceEvent) Chain() (metastore.ChainID, error) {
	cl, err := metastore.ParseClass(e.Class)
	if err != nil {
		return metastore.ChainID{}, fmt.Errorf("%w: %v", ErrEvent, err)
	}
	c := metastore.ChainID{Star: e.Star, Class: cl}
	if err := metastore.ValidateChain(c); err != nil {
		return metastore.ChainID{}, fmt.Errorf("%w: %v", ErrEvent, err)
	}
	return c, nil
}

// Result is what one probe of a fenced epoch did.
type Result struct {
	Chain   string   `json:"chain"`
	Epoch   uint64   `json:"epoch"`
	Cut     uint64   `json:"cut"`
	Window  int      `json:"window"`
	Deleted []string `json:"deleted,omitempty"` // "bucket/key" of each flight copy deleted
	Poisons int      `json:"poisons"`           // poison copies seen (and kept)
	Junk    []string `json:"junk,omitempty"`    // "bucket/key" of junk copies (kept, reported)
}

// Prober deletes the garbage a fence leaves above its cut.
type Prober struct {
	Meta metastore.Store
	Log  *slog.Logger
}

// Probe verifies the fenced epoch against the metastore and the buckets and
// then deletes every flight copy in slots [cut, cut+window) of it, in every
// bucket of set: the minted window bounds how far the deposed writer could
// have run ahead of the cut. Poison and junk are never deleted. Checks
// before any delete: the epoch record is fenced (ErrNotFenced), its cut is
// ev.Cut (ErrCutMismatch), its bucket names are set's (ErrSetMismatch), and
// the cut slot is dead in the buckets (ErrCutNotDead). Only flights of the
// epoch's writer (the record's nonce) are deleted; anything else is kept and
// reported as junk. Idempotent: a rerun
// finds nothing more to delete. A bucket error on one copy does not stop
// the others; the errors are returned together after the pass.
func (p *Prober) Probe(ctx context.Context, set chain.Set, ev FenceEvent) (Result, error) {
	c, err := ev.Chain()
	if err != nil {
		return Result{}, err
	}
	res := Result{Chain: c.String(), Epoch: ev.Epoch, Cut: ev.Cut}
	e, err := p.Meta.GetEpoch(ctx, c, ev.Epoch)
	switch {
	case errors.Is(err, metastore.ErrNotFound):
		return res, fmt.Errorf("probe %s epoch %d: no epoch record: %w", c, ev.Epoch, ErrNotFenced)
	case err != nil:
		return res, fmt.Errorf("probe %s epoch %d: %w", c, ev.Epoch, err)
	case e.State != metastore.EpochFenced:
		return res, fmt.Errorf("probe %s epoch %d: state %d: %w", c, ev.Epoch, e.State, ErrNotFenced)
	case e.Cut != ev.Cut:
		return res, fmt.Errorf("probe %s epoch %d: event cut %d, epoch record cut %d: %w", c, ev.Epoch, ev.Cut, e.Cut, ErrCutMismatch)
	}
	set.Star = c.Star
	if e.W >= 1 {
		set.W = e.W
	}
	if len(e.Buckets) > 0 {
		names := make([]string, len(set.Buckets))
		for i, b := range set.Buckets {
			if b != nil {
				names[i] = b.Name()
			}
		}
		if !slices.Equal(names, e.Buckets) {
			return res, fmt.Errorf("probe %s epoch %d: set %v, epoch minted with %v: %w", c, ev.Epoch, names, e.Buckets, ErrSetMismatch)
		}
	}
	if err := set.Validate(); err != nil {
		return res, fmt.Errorf("probe %s: %w", c, err)
	}
	res.Window = max(e.Window, 1)
	if ev.Window != 0 && ev.Window != e.Window {
		p.log().Warn("probe: event window differs from the minted window; using the minted one",
			"chain", c.String(), "epoch", ev.Epoch, "event", ev.Window, "minted", e.Window)
	}

	// The cut slot must be dead before anything above it is touched.
	states := make([]chain.State, set.K())
	var readErrs []error
	for i := range set.Buckets {
		cp, err := set.ReadEnvelope(ctx, i, format.SlotKey(c.Star, ev.Epoch, ev.Cut))
		if err != nil {
			readErrs = append(readErrs, err)
			continue // Unknown
		}
		states[i] = cp.State
	}
	if v := chain.Classify(set.W, states); v != chain.Dead {
		return res, fmt.Errorf("probe %s epoch %d: cut slot %d copies %v: %w%s", c, ev.Epoch, ev.Cut, states, ErrCutNotDead, joinSuffix(readErrs))
	}

	failed := make([]int, set.K()) // failed calls per bucket
	firstErr := make([]error, set.K())
	fail := func(i int, err error) {
		if failed[i] == 0 {
			firstErr[i] = err
		}
		failed[i]++
	}
	for slot := ev.Cut; slot < ev.Cut+uint64(res.Window); slot++ {
		key := format.SlotKey(c.Star, ev.Epoch, slot)
		for i, b := range set.Buckets {
			cp, err := set.ReadEnvelope(ctx, i, key)
			if err != nil {
				fail(i, err)
				continue
			}
			switch cp.State {
			case chain.Poison:
				res.Poisons++
			case chain.Junk:
				res.Junk = append(res.Junk, b.Name()+"/"+key)
				p.log().Warn("probe: junk at a slot key (kept)", "bucket", b.Name(), "key", key, "err", cp.Err)
			case chain.Flight:
				if e.Nonce != ([16]byte{}) && cp.Env.Nonce != format.Nonce(e.Nonce) {
					// Not the epoch's writer: nothing the protocol writes. Keep it, loudly.
					res.Junk = append(res.Junk, b.Name()+"/"+key)
					p.log().Warn("probe: flight with a foreign nonce (kept)", "bucket", b.Name(), "key", key)
					continue
				}
				if err := b.Delete(ctx, key); err != nil {
					fail(i, fmt.Errorf("delete %s/%s: %w", b.Name(), key, err))
					continue
				}
				res.Deleted = append(res.Deleted, b.Name()+"/"+key)
			}
		}
	}
	var errs []error
	for i, n := range failed {
		if n > 0 {
			errs = append(errs, fmt.Errorf("%d calls failed on bucket %s, first: %w", n, set.Buckets[i].Name(), firstErr[i]))
		}
	}
	// Info only when the probe did or found something: the sweep probes
	// the last epochs of every chain again and again (strand dev every
	// 30 s, one more epoch per restart), and a probe that finds only its
	// epoch's poisons is nothing to act on (issue 34).
	level := slog.LevelDebug
	if len(res.Deleted) > 0 || len(res.Junk) > 0 || len(errs) > 0 {
		level = slog.LevelInfo
	}
	p.log().Log(ctx, level, "probe: epoch probed", "chain", c.String(), "epoch", ev.Epoch, "cut", ev.Cut,
		"window", res.Window, "deleted", len(res.Deleted), "poisons", res.Poisons, "junk", len(res.Junk), "errors", len(errs))
	if len(errs) > 0 {
		return res, fmt.Errorf("probe %s epoch %d: %w", c, ev.Epoch, errors.Join(errs...))
	}
	return res, nil
}

func joinSuffix(errs []error) string {
	if len(errs) == 0 {
		return ""
	}
	return " (" + errors.Join(errs...).Error() + ")"
}

func (p *Prober) log() *slog.Logger {
	if p.Log != nil {
		return p.Log
	}
	return slog.New(slog.DiscardHandler)
}

// SettledPrefix is where settled objects live in the settled bucket.
const SettledPrefix = "streams/"

// ParseSettledKey splits streams/<stream-id>/<first>-<last>
// (format.SettledKey).
func ParseSettledKey(key string) (stream string, first, last uint64, ok bool) {
	rest, found := strings.CutPrefix(key, SettledPrefix)
	if !found {
		return "", 0, 0, false
	}
	id, rng, found := strings.Cut(rest, "/")
	if !found {
		return "", 0, 0, false
	}
	a, b, found := strings.Cut(rng, "-")
	if !found || len(a) != 20 || len(b) != 20 {
		return "", 0, 0, false
	}
	if _, err := format.ParseStreamID(id); err != nil {
		return "", 0, 0, false
	}
	f, err1 := strconv.ParseUint(a, 10, 64)
	l, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil || l < f {
		return "", 0, 0, false
	}
	return id, f, l, true
}

// RefLookup returns a stream's refs whose range ends at or after fromSeq,
// in seq order, at most limit (metastore.Store.QueryRefs).
type RefLookup func(ctx context.Context, streamID string, fromSeq uint64, limit int) ([]metastore.Ref, error)

// Orphans is the settled-object report: of keys (settled object keys), the
// ones no ref points to (no ref of the stream has a settled location with
// that key), and the keys that are not settled keys at all. It only reads.
// A settled object written just before its refs were swapped to it is
// reported too; Deletable tells the ones that may be deleted. Refs are
// looked up once per stream, from the lowest first seq among its keys.
func Orphans(ctx context.Context, keys []string, refs RefLookup) (orphans, unparsed []string, err error) {
	found, unparsed, err := findOrphans(ctx, keys, refs)
	for _, o := range found {
		orphans = append(orphans, o.Key)
	}
	return orphans, unparsed, err
}

// Orphan is a settled object no ref points to.
type Orphan struct {
	Key string
	// Deletable: no ref of its stream that overlaps its seq range is still
	// in transit, so no settle (not even a copy that read the refs long
	// ago, whose swap is conditional on them) can ever swap a ref to it:
	// it is provably unreferenced from now on. An orphan overlapping a
	// transit ref may be an object a settle step has written and is about
	// to swap in; it is kept.
	Deletable bool
}

func findOrphans(ctx context.Context, keys []string, refs RefLookup) (orphans []Orphan, unparsed []string, err error) {
	type obj struct {
		key         string
		first, last uint64
	}
	type span struct{ first, last uint64 }
	byStream := map[string][]obj{}
	var streams []string
	for _, k := range keys {
		id, f, l, ok := ParseSettledKey(k)
		if !ok {
			unparsed = append(unparsed, k)
			continue
		}
		if _, seen := byStream[id]; !seen {
			streams = append(streams, id)
		}
		byStream[id] = append(byStream[id], obj{k, f, l})
	}
	const page = 500
	for _, id := range streams {
		objs := byStream[id]
		from := objs[0].first
		for _, o := range objs {
			from = min(from, o.first)
		}
		referenced := map[string]bool{}
		var transit []span
		for {
			rs, err := refs(ctx, id, from, page)
			if err != nil {
				return nil, nil, fmt.Errorf("probe: refs of stream %s from %d: %w", id, from, err)
			}
			for _, r := range rs {
				inTransit := false
				for _, loc := range r.Locations {
					if loc.Settled {
						referenced[loc.Key] = true
					} else {
						inTransit = true
					}
				}
				if inTransit {
					transit = append(transit, span{r.FirstSeq, r.LastSeq})
				}
			}
			// Only an empty page ends the refs: a page stops at 1 MB
			// (metastore.QueryPage), short of the limit while more follow.
			if len(rs) == 0 || rs[len(rs)-1].LastSeq == ^uint64(0) {
				break
			}
			from = rs[len(rs)-1].LastSeq + 1
		}
		for _, o := range objs {
			if referenced[o.key] {
				continue
			}
			deletable := true
			for _, t := range transit {
				if t.first <= o.last && o.first <= t.last {
					deletable = false
					break
				}
			}
			orphans = append(orphans, Orphan{Key: o.key, Deletable: deletable})
		}
	}
	return orphans, unparsed, nil
}
