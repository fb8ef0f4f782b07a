package trim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
)

// Defaults.
const (
	DefaultMaxSlotsPerStep = 4096
	DefaultMaxStepsPerRun  = 16
	// refPage is the page size of ref queries.
	refPage = 100
	// streamPage is the page size of the stream listing.
	streamPage = 100
)

// Trimmer deletes what settlement no longer needs. Safe for concurrent
// use; copies may run at once.
type Trimmer struct {
	Meta    metastore.Store
	Sets    absorb.Sets
	Settled objstore.Bucket
	// Clock reads now for retention; nil is the real clock.
	Clock clock.Clock
	// MaxSlotsPerStep (0: DefaultMaxSlotsPerStep) and MaxStepsPerRun (0:
	// DefaultMaxStepsPerRun) bound the work of one Step and one Run.
	MaxSlotsPerStep int
	MaxStepsPerRun  int
	// PassIndex also deletes the pass indexes (design 014) that the
	// trimmed slots' passes had in the Settled bucket (settle has moved
	// their data into runs, packs and refs), and the runs and packs below
	// the flushed cursor; a chain still in refs mode is trimmed as without
	// it. Without it, a chain whose passes are indexed (Head.Indexed) is
	// refused: absorb.ErrIndexed.
	PassIndex bool
	// Window is the pass index window cache the deletion check reads
	// (PassIndex; nil: a fresh one per deleted stream, with
	// passindex.DefaultWindowCacheBytes). Its MaxBytes must fit the process.
	Window *passindex.Window
	// Log: nil is slog.Default().
	Log *slog.Logger
}

func (t *Trimmer) log() *slog.Logger {
	if t.Log != nil {
		return t.Log
	}
	return slog.Default()
}

func orDefault(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

// Result says what one chain step did.
type Result struct {
	From, To metastore.Cursor // the trimmed cursor moved from From to To
	Slots    int              // slots visited
	Deleted  int              // flight copies deleted
	Poison   int              // poison copies seen and kept
	Lost     bool             // another copy moved the cursor first
}

// Step deletes the slots [Trimmed, min(Trimmed+MaxSlotsPerStep, Settled))
// of one epoch from every bucket of the chain's set, and moves the trimmed
// cursor over them. Each copy's envelope is read first: only a flight of
// that very slot is deleted; poison (and anything unrecognised) stays. A
// bucket that does not answer fails the step before the cursor moves, so
// the next run retries it.
func (t *Trimmer) Step(ctx context.Context, c metastore.ChainID) (Result, error) {
	h, err := t.Meta.GetHead(ctx, c)
	if err != nil {
		return Result{}, fmt.Errorf("trim %s: %w", c, err)
	}
	if !t.PassIndex && !h.Indexed.IsZero() {
		// Its runs, packs and pass indexes would never be deleted, nor
		// would deletions wait for the window.
		return Result{From: h.Trimmed, To: h.Trimmed}, absorb.IndexedErr("trim", c, h.Indexed)
	}
	if t.PassIndex {
		if err := t.runs(ctx, c, h.Flushed); err != nil {
			return Result{From: h.Trimmed, To: h.Trimmed}, fmt.Errorf("trim %s: %w", c, err)
		}
	}
	st, err := absorb.Follow(ctx, t.Meta, c, h.Trimmed, h.Settled, orDefault(t.MaxSlotsPerStep, DefaultMaxSlotsPerStep))
	res := Result{From: st.From, To: st.From}
	if err != nil || st.Empty() {
		return res, err
	}
	if st.First < st.End {
		set, err := t.Sets.For(c)
		if err != nil {
			return res, err
		}
		if err := t.slots(ctx, set, st.Epoch, st.First, st.End, &res); err != nil {
			return res, fmt.Errorf("trim %s: %w", c, err)
		}
	}
	if t.PassIndex {
		if err := t.passIndexes(ctx, c, st); err != nil {
			return res, fmt.Errorf("trim %s: %w", c, err)
		}
	}
	if res.Lost, err = absorb.Advance(ctx, t.Meta, c, metastore.Trimmed, st); err != nil {
		return res, fmt.Errorf("trim: %w", err)
	}
	res.To = st.To
	return res, nil
}

// runs deletes the run indexes (design 014, level 1, and the merged runs
// of level 2) of chain c that start before the flushed cursor, then the
// packs of every run that
// starts before it (every plan's: a copy's plan nobody adopted too):
// every record in them is behind a ref, and the head no longer names
// them. Run indexes go first, so a reader that can still find a run finds
// its packs; a reader that read one before finds a pack gone and reads
// its head again. One listing of the chain's runs and one of its packs:
// they hold the live runs' and little else.
func (t *Trimmer) runs(ctx context.Context, c metastore.ChainID, flushed metastore.Cursor) error {
	// Merged runs (design 014, level 2) first, then level-1 runs: a
	// merged run below flushed copies level-1 runs below it too.
	if err := t.runIndexes(ctx, c, flushed, format.MergedRunKey); err != nil {
		return err
	}
	if err := t.runIndexes(ctx, c, flushed, format.RunIndexKey); err != nil {
		return err
	}
	if err := t.packs(ctx, c, flushed, "merged/"); err != nil {
		return err
	}
	return t.packs(ctx, c, flushed, "")
}

// runIndexes deletes the run indexes at keyOf (a level's key) of chain c
// that start before flushed, and their command indexes (design 014, "The
// command index": each lists right after its run; one whose run was
// never written, a copy's plan nobody adopted, goes too).
func (t *Trimmer) runIndexes(ctx context.Context, c metastore.ChainID, flushed metastore.Cursor, keyOf func(star, class string, epoch, first uint64) string) error {
	runs := keyOf(c.Star, c.Class.String(), 0, 0)
	runs = runs[:len(runs)-42] // index/<star>/<class>/runs/ (or merged/)
	keys, err := t.Settled.List(ctx, runs)
	if err != nil {
		return fmt.Errorf("list runs %s: %w", runs, err)
	}
	for _, k := range keys {
		run := strings.TrimSuffix(k, format.CommandIndexKey("")) // a run's command index goes with it
		n := numbers(strings.TrimPrefix(run, runs), 2)
		if n == nil || run != keyOf(c.Star, c.Class.String(), n[0], n[1]) {
			continue // not a run index key: not ours to delete
		}
		e, slot := n[0], n[1]
		if !(metastore.Cursor{Epoch: e, Slot: slot}).Less(flushed) {
			break // keys list in cursor order (zero-padded)
		}
		if err := t.Settled.Delete(ctx, k); err != nil {
			return fmt.Errorf("delete run %s: %w", k, err)
		}
	}
	return nil
}

// packs deletes the packs under packs/<star>/<class>/<sub> of chain c
// (sub "merged/": merged runs') whose run starts before flushed (every
// plan's, whatever its digest: format.ParsePackKey).
func (t *Trimmer) packs(ctx context.Context, c metastore.ChainID, flushed metastore.Cursor, sub string) error {
	packs := "packs/" + c.Star + "/" + c.Class.String() + "/" + sub
	keys, err := t.Settled.List(ctx, packs)
	if err != nil {
		return fmt.Errorf("list packs %s: %w", packs, err)
	}
	for _, k := range keys {
		p, ok := format.ParsePackKey(k)
		if !ok || p.Star != c.Star || p.Class != c.Class.String() || p.Merged != (sub != "") {
			continue // not a pack key: not ours to delete
		}
		if !(metastore.Cursor{Epoch: p.Epoch, Slot: p.FirstSlot}).Less(flushed) {
			break
		}
		if err := t.Settled.Delete(ctx, k); err != nil {
			return fmt.Errorf("delete pack %s: %w", k, err)
		}
	}
	return nil
}

// numbers parses want decimal numbers separated by '/' or '-' (a run or
// pack key's tail), or nil.
func numbers(s string, want int) []uint64 {
	parts := strings.FieldsFunc(s, func(r rune) bool { return r == '/' || r == '-' })
	if len(parts) != want {
		return nil
	}
	out := make([]uint64, want)
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return nil
		}
		out[i] = v
	}
	return out
}

// passIndexes deletes the pass indexes of st's epoch that start before the
// step's end (all of them at an epoch step, which leaves the epoch): their
// passes end at or before the settled cursor (settle moves it to pass ends
// only), so no reader's window (from the settled cursor) holds them. One
// listing of the epoch's indexes in the Settled bucket: the trimmed ones
// are gone, so it holds about the settle window's passes.
func (t *Trimmer) passIndexes(ctx context.Context, c metastore.ChainID, st absorb.Step) error {
	prefix := format.PassIndexKey(c.Star, c.Class.String(), st.Epoch, 0)
	prefix = prefix[:len(prefix)-20]
	keys, err := t.Settled.List(ctx, prefix)
	if err != nil {
		return fmt.Errorf("list pass indexes %s: %w", prefix, err)
	}
	for _, k := range keys {
		slot, err := strconv.ParseUint(strings.TrimPrefix(k, prefix), 10, 64)
		if err != nil || k != format.PassIndexKey(c.Star, c.Class.String(), st.Epoch, slot) {
			continue // not a pass index key: not ours to delete
		}
		if st.First < st.End && slot >= st.End {
			break // keys list in slot order (zero-padded)
		}
		if err := t.Settled.Delete(ctx, k); err != nil {
			return fmt.Errorf("delete pass index %s: %w", k, err)
		}
	}
	return nil
}

// slotWorkers bounds the slots a step trims at once. A slot is K envelope
// GETs and deletes, one after another; one slot at a time trimmed at one
// GET's pace, about 100 slots a second behind S3 Express's latency, while
// a star at full speed cuts hundreds (issue 36: in `strand bench` trim
// fell behind settle, and the chain behind it).
const slotWorkers = 32

// slots trims the slots [first, end) of epoch, slotWorkers at a time. A
// slot that fails stops the slots not yet started; the error returned is
// the lowest failing slot's, after every slot started has finished.
func (t *Trimmer) slots(ctx context.Context, set chain.Set, epoch, first, end uint64, res *Result) error {
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		failed  = end // the lowest failing slot
		failErr error
		sem     = make(chan struct{}, slotWorkers)
	)
	for slot := first; slot < end; slot++ {
		sem <- struct{}{}
		mu.Lock()
		stop := failErr != nil
		mu.Unlock()
		if stop {
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			var r Result
			err := t.slot(ctx, set, epoch, slot, &r)
			mu.Lock()
			defer mu.Unlock()
			res.Slots += r.Slots
			res.Deleted += r.Deleted
			res.Poison += r.Poison
			if err != nil && slot < failed {
				failed, failErr = slot, err
			}
		}()
	}
	wg.Wait()
	return failErr
}

func (t *Trimmer) slot(ctx context.Context, set chain.Set, epoch, slot uint64, res *Result) error {
	res.Slots++
	key := format.SlotKey(set.Star, epoch, slot)
	for i, b := range set.Buckets {
		cp, err := set.ReadEnvelope(ctx, i, key)
		if err != nil {
			return err
		}
		switch cp.State {
		case chain.Flight:
			if err := b.Delete(ctx, key); err != nil {
				return fmt.Errorf("delete %s/%s: %w", b.Name(), key, err)
			}
			res.Deleted++
		case chain.Poison:
			res.Poison++ // never deleted while the star exists
		case chain.Junk:
			t.log().Warn("trim: unrecognised object at a slot key kept", "bucket", b.Name(), "key", key, "err", cp.Err)
		}
	}
	return nil
}

// Run steps chain until its trimmed cursor reaches the settled cursor, at
// most MaxStepsPerRun steps. It returns the trimmed cursor reached.
func (t *Trimmer) Run(ctx context.Context, c metastore.ChainID) (metastore.Cursor, error) {
	return absorb.RunSteps(orDefault(t.MaxStepsPerRun, DefaultMaxStepsPerRun), func() (metastore.Cursor, metastore.Cursor, error) {
		res, err := t.Step(ctx, c)
		return res.From, res.To, err
	})
}

// StreamResult says what Streams did.
type StreamResult struct {
	Streams     int // streams listed
	Deleted     int // deleting streams finished (metadata removed)
	Waiting     int // deleting streams left for a later run: parts still in the pass index window
	RefsDropped int // refs deleted (retention and deletion)
	Objects     int // settled objects deleted
	Conflicts   int // retention deletes refused: a ref changed since it was read
}

// Streams applies retention and deletion to every stream in the metastore
// (the package documentation says how):
//
//   - A deleting stream (ListDeleting, or one marked deleting in place)
//     loses all its refs, then its settled objects, then its metadata
//     (DeleteStream); with PassIndex, only once its chain's window holds
//     none of its parts (settle has made them refs), else it waits for a
//     later run (Waiting). Transit bytes it had in chain slots go with the
//     slots, by the trimmed cursor.
//   - Any other stream loses its leading settled refs past its retention or
//     below its trim point, both from its current command state
//     (Trimmer.newest, Retention), never its last ref.
//
// Refs go first, so no ref ever points at a missing object; a crash
// between leaves orphan objects for the garbage probe.
func (t *Trimmer) Streams(ctx context.Context) (StreamResult, error) {
	var res StreamResult
	now := clock.OrReal(t.Clock).Now().UnixMilli()
	var errs []error
	each := func(st metastore.Stream) {
		res.Streams++
		var err error
		if st.State == metastore.StreamDeleting {
			err = t.deleteStream(ctx, st, &res)
		} else {
			err = t.retainStream(ctx, st, now, &res)
		}
		if err != nil {
			t.log().Error("trim: stream", "stream", st.Name, "id", st.ID, "err", err)
			errs = append(errs, fmt.Errorf("trim: stream %q (%s): %w", st.Name, st.ID, err))
		}
	}
	// The streams by name (active ones, and any marked deleting in place
	// by an older version), then the deleting streams off their names.
	for after := ""; ; {
		page, next, err := t.Meta.ListStreams(ctx, "", after, streamPage)
		if err != nil {
			return res, errors.Join(append(errs, fmt.Errorf("trim: list streams after %q: %w", after, err))...)
		}
		for _, st := range page {
			each(st)
		}
		if next == "" {
			break
		}
		after = next
	}
	for after := ""; ; {
		page, next, err := t.Meta.ListDeleting(ctx, after, streamPage)
		if err != nil {
			return res, errors.Join(append(errs, fmt.Errorf("trim: list deleting streams after %q: %w", after, err))...)
		}
		for _, st := range page {
			each(st)
		}
		if next == "" {
			return res, errors.Join(errs...)
		}
		after = next
	}
}

func (t *Trimmer) deleteStream(ctx context.Context, st metastore.Stream, res *StreamResult) error {
	if !t.PassIndex {
		// Without the switch trim cannot see the window it must wait for.
		c := metastore.ChainID{Star: st.Star, Class: st.Class}
		h, err := t.Meta.GetHead(ctx, c)
		if err != nil && !errors.Is(err, metastore.ErrNotFound) {
			return fmt.Errorf("head of chain %s: %w", c, err)
		}
		if !h.Indexed.IsZero() {
			return absorb.IndexedErr("trim (deleting a stream)", c, h.Indexed)
		}
	}
	if t.PassIndex {
		// Settle turns the stream's parts still in its chain's window into
		// refs; deleting the metadata first would leave those refs to
		// nobody. Once the window holds none (read before the refs: settle
		// writes a step's refs before it moves the cursor past them, and a
		// stale copy of the step writes nothing), no ref of the stream can
		// appear any more.
		parts, err := t.window().StreamParts(ctx, st, 0)
		if err != nil {
			return fmt.Errorf("pass index window: %w", err)
		}
		if len(parts) > 0 {
			res.Waiting++
			return nil
		}
	}
	for conflicts := 0; ; {
		refs, err := t.Meta.QueryRefs(ctx, st.ID, 0, refPage)
		if err != nil {
			return err
		}
		if len(refs) == 0 {
			break
		}
		err = t.drop(ctx, refs, res)
		if errors.Is(err, metastore.ErrConflict) && conflicts < maxConflicts {
			conflicts++ // a ref changed since it was read (settle swapped it): read again
			continue
		}
		if err != nil {
			return err
		}
	}
	if err := t.Meta.DeleteStream(ctx, st.Name, st.ID); err != nil {
		return fmt.Errorf("delete stream metadata: %w", err)
	}
	res.Deleted++
	return nil
}

// maxConflicts bounds how often one stream's deletion re-reads its refs
// after a conditional delete found one changed, in one run.
const maxConflicts = 3

// retainStream applies retention and the stream's explicit trim point,
// both from the stream's current command state (newest, Retention).
func (t *Trimmer) retainStream(ctx context.Context, st metastore.Stream, now int64, res *StreamResult) error {
	newest, ok, err := t.newest(ctx, st)
	if err != nil || !ok {
		return err // no refs and no parts: nothing to trim
	}
	var cmds format.StreamCommands
	if newest.Commands != nil {
		cmds = *newest.Commands
	}
	below := cmds.TrimSeq
	retention := Retention(st, cmds)
	cutoff := int64(math.MinInt64)
	if retention > 0 {
		cutoff = now - retention
	}
	if below == 0 && retention <= 0 {
		return nil
	}
	last := newest // without the pass index, the last ref
	if t.PassIndex {
		if last, err = t.Meta.LastRef(ctx, st.ID); errors.Is(err, metastore.ErrNotFound) {
			return nil // every record in runs and passes: no ref to drop
		} else if err != nil {
			return fmt.Errorf("last ref: %w", err)
		}
	}
	return t.retain(ctx, st, cutoff, below, last.LastSeq, res)
}

// newest is stream st's newest durable part, whose command state is the
// stream's current one (ADR 0045): the window's last part
// (passindex.Window.LastRef: passes and runs, with PassIndex) or else its last
// ref. Not the last ref alone: with the pass index a stream's newest
// commands stay in runs until they flush (issue 30, finding 1). ok is
// false when the stream has neither refs nor parts.
func (t *Trimmer) newest(ctx context.Context, st metastore.Stream) (metastore.Ref, bool, error) {
	var last metastore.Ref
	var err error
	if t.PassIndex {
		last, err = t.window().LastRef(ctx, st)
	} else {
		last, err = t.Meta.LastRef(ctx, st.ID)
	}
	switch {
	case errors.Is(err, metastore.ErrNotFound):
		return last, false, nil
	case err != nil:
		return last, false, fmt.Errorf("newest part: %w", err)
	}
	return last, true, nil
}

// Retention is the retention trim applies to stream st whose current
// command state is cmds (ADR 0045): the config command's (cmds.Config,
// when cmds.HasConfig) or else the stream's creation retention, and never
// shorter than the metadata's (st.RetentionMs, 0 is forever). The
// metadata follows a config command after its ack (the server writes it
// then), so it leads the durable state while the command's flight is not
// yet absorbed, and lags it when the server died between: each is the
// newer one at times, and trim, which deletes, applies a retention only
// once both allow it.
func Retention(st metastore.Stream, cmds format.StreamCommands) int64 {
	r := st.RetentionMs
	if !cmds.HasConfig {
		return r
	}
	if c := cmds.Config.RetentionMs; r > 0 && (c <= 0 || c > r) {
		r = c
	}
	return r
}

// window is the pass index window the stream checks read.
func (t *Trimmer) window() *passindex.Window {
	if t.Window != nil {
		return t.Window
	}
	return &passindex.Window{Meta: t.Meta, Bucket: t.Settled}
}

// retain drops the stream's leading settled refs that are expired (their
// last timestamp before cutoff) or trimmed (they end below the trim point
// below), never its last ref (the one that ends at lastSeq, read before,
// or one a merge made of it: it carries the stream's command state).
func (t *Trimmer) retain(ctx context.Context, st metastore.Stream, cutoff int64, below, lastSeq uint64, res *StreamResult) error {
	from := uint64(0)
	for {
		// A page may end before its limit while more refs follow
		// (metastore.QueryPage), so only an empty page, or a ref kept,
		// ends the loop.
		refs, err := t.Meta.QueryRefs(ctx, st.ID, from, refPage)
		if err != nil || len(refs) == 0 {
			return err
		}
		n := 0
		for n < len(refs) && refs[n].LastSeq < lastSeq && (refs[n].LastTsMs < cutoff || refs[n].LastSeq < below) && settledOnly(refs[n]) {
			n++
		}
		if n > 0 {
			// The floor first: whatever happens to the refs from here on,
			// the stream never reopens below the seqs they held.
			if err := t.Meta.RaiseFloor(ctx, st.Name, st.ID, refs[n-1].LastSeq+1); err != nil {
				return fmt.Errorf("raise the floor to %d: %w", refs[n-1].LastSeq+1, err)
			}
			err := t.drop(ctx, refs[:n], res)
			if errors.Is(err, metastore.ErrConflict) {
				// Settle merged one of them since it was read: the next run
				// sees the merged ref.
				res.Conflicts++
				t.log().Info("trim: retention: a ref changed since it was read; next run", "stream", st.Name, "err", err)
				return nil
			}
			if err != nil {
				return err
			}
		}
		if n < len(refs) {
			return nil
		}
		from = refs[n-1].LastSeq + 1
	}
}

// drop deletes refs, each only if it is still exactly as read (ErrConflict
// otherwise: settle swapped it), then the settled objects they point at.
func (t *Trimmer) drop(ctx context.Context, refs []metastore.Ref, res *StreamResult) error {
	var keys []string
	seen := map[string]bool{}
	for _, r := range refs {
		for _, l := range r.Locations {
			if l.Settled && !seen[l.Key] {
				seen[l.Key] = true
				keys = append(keys, l.Key)
			}
		}
	}
	if err := t.Meta.DeleteRefs(ctx, refs); err != nil {
		return fmt.Errorf("delete %d refs: %w", len(refs), err)
	}
	res.RefsDropped += len(refs)
	for _, k := range keys {
		if err := t.Settled.Delete(ctx, k); err != nil {
			return fmt.Errorf("delete settled object %s: %w", k, err)
		}
		res.Objects++
	}
	return nil
}

func settledOnly(r metastore.Ref) bool {
	for _, l := range r.Locations {
		if !l.Settled {
			return false
		}
	}
	return true
}
