package metastore

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Item keys of the single-table layout (see the package documentation).
// These strings are part of the stored format: do not change them.
const (
	StreamPrefix = "STREAM#" // PK prefix of stream items
	RefPKPrefix  = "SID#"    // PK prefix of a stream's ref items
	RefSKPrefix  = "REF#"    // SK prefix of ref items
	ChainPrefix  = "CHAIN#"  // PK prefix of chain head and epoch items
	EpochPrefix  = "EPOCH#"  // SK prefix of epoch items
	TokenPrefix  = "TOKEN#"  // PK prefix of token items
	MetaSK       = "META"    // SK of stream and token items
	HeadSK       = "HEAD"    // SK of a chain's head item
	// DeletingPK is the partition of the deleting streams' items (SK: the
	// stream id): a deleted stream leaves its name at once (SetStreamState
	// with StreamDeleting) and waits there for trim (ListDeleting).
	DeletingPK = "DELETING"
)

// Limits every implementation enforces, so that callers see the same
// ErrInvalid everywhere (the DynamoDB limits decide them).
const (
	// MaxNameLen is the longest stream name, in bytes.
	MaxNameLen = 512
	// MaxSwapRefs is the most refs one SwapRefs may replace: one DynamoDB
	// transaction holds at most 100 items.
	MaxSwapRefs = 100
	// MaxSettleOldRefs is the most old refs one SettleRef may replace:
	// its DynamoDB transaction is the head's ConditionCheck, the Put of
	// the new ref (over the first old one), a Delete of each other old
	// ref and SettleApart's ConditionCheck, at most MaxSwapRefs actions.
	MaxSettleOldRefs = MaxSwapRefs - 2
	// MaxPutRefsPerTx is how many refs one DynamoDB transaction of PutRefs
	// writes: 100 items, one of them the condition check on the head.
	MaxPutRefsPerTx = 99
	// MaxDeleteRefsPerTx is how many conditional deletes one DynamoDB
	// transaction of DeleteRefs holds (100 items).
	MaxDeleteRefsPerTx = 100
	// MaxTokenDescriptionLen is the longest token description, in bytes.
	MaxTokenDescriptionLen = 256
)

// StreamPK is the partition key of stream name's META item.
func StreamPK(name string) string { return StreamPrefix + name }

// RefPK is the partition key of stream id's refs.
func RefPK(streamID string) string { return RefPKPrefix + streamID }

// RefSK is the sort key of the ref whose first seq is seq: "REF#" and the
// seq zero-padded to 20 decimal digits, so lexical order is numeric order.
func RefSK(seq uint64) string { return RefSKPrefix + pad20(seq) }

// ParseRefSK is the inverse of RefSK.
func ParseRefSK(sk string) (uint64, error) { return parseSeqSK(sk, RefSKPrefix) }

// ChainPK is the partition key of a chain's head and epoch items:
// "CHAIN#<star>#<class>" with the class's name (standard, express).
func ChainPK(c ChainID) string { return ChainPrefix + c.Star + "#" + c.Class.String() }

// EpochSK is the sort key of epoch e's item, zero-padded like RefSK.
func EpochSK(e uint64) string { return EpochPrefix + pad20(e) }

// ParseEpochSK is the inverse of EpochSK.
func ParseEpochSK(sk string) (uint64, error) { return parseSeqSK(sk, EpochPrefix) }

// TokenPK is the partition key of the token whose secret hashes to hash.
func TokenPK(hash string) string { return TokenPrefix + hash }

func pad20(n uint64) string { return fmt.Sprintf("%020d", n) }

func parseSeqSK(sk, prefix string) (uint64, error) {
	digits, ok := strings.CutPrefix(sk, prefix)
	if !ok || len(digits) != 20 {
		return 0, fmt.Errorf("%w: sort key %q is not %s<20 digits>", ErrInvalid, sk, prefix)
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: sort key %q: %v", ErrInvalid, sk, err)
	}
	return n, nil
}

// ValidateStreamName checks a stream name: 1 to MaxNameLen bytes of UTF-8
// without control characters.
func ValidateStreamName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty stream name", ErrInvalid)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: stream name longer than %d bytes", ErrInvalid, MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: stream name %q is not UTF-8", ErrInvalid, name)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: stream name %q holds a control character", ErrInvalid, name)
	}
	return nil
}

// ValidateStreamID checks a stream id: 32 lowercase hex digits.
func ValidateStreamID(id string) error {
	if !isLowerHex(id, 32) {
		return fmt.Errorf("%w: stream id %q is not 32 lowercase hex digits", ErrInvalid, id)
	}
	return nil
}

// ValidateStream checks a stream given to CreateStream: valid name and id,
// a known class, a non-empty star without '#', non-negative times, and
// State StreamActive (a stream is created active).
func ValidateStream(s Stream) error {
	if err := ValidateStreamName(s.Name); err != nil {
		return err
	}
	if err := ValidateStreamID(s.ID); err != nil {
		return err
	}
	if err := validateClass(s.Class); err != nil {
		return err
	}
	if err := validateStar(s.Star); err != nil {
		return err
	}
	if s.CreatedMs < 0 || s.RetentionMs < 0 {
		return fmt.Errorf("%w: stream %q: negative created or retention time", ErrInvalid, s.Name)
	}
	if s.State != StreamActive {
		return fmt.Errorf("%w: stream %q: created in state %d, want active", ErrInvalid, s.Name, s.State)
	}
	if s.Timestamping.Mode > TimestampArrival {
		return fmt.Errorf("%w: stream %q: unknown timestamp mode %d", ErrInvalid, s.Name, s.Timestamping.Mode)
	}
	return nil
}

// ValidateStreamState checks that st is StreamActive or StreamDeleting.
func ValidateStreamState(st StreamState) error {
	if st != StreamActive && st != StreamDeleting {
		return fmt.Errorf("%w: unknown stream state %d", ErrInvalid, st)
	}
	return nil
}

// ValidateLimit checks a page size: it must be positive.
func ValidateLimit(limit int) error {
	if limit <= 0 {
		return fmt.Errorf("%w: limit %d, want > 0", ErrInvalid, limit)
	}
	return nil
}

// ValidateRef checks one ref: a valid stream id, FirstSeq <= LastSeq,
// Bytes >= 0, and at least one location, each with a key and a non-negative
// offset and length (ErrInvalid). A ref being written must also pass
// CheckRefSize; a ref only named (an old ref of SwapRefs, a ref to delete)
// need not: a ref stored by an older build may be larger.
func ValidateRef(r Ref) error {
	if err := ValidateStreamID(r.StreamID); err != nil {
		return err
	}
	if r.FirstSeq > r.LastSeq {
		return fmt.Errorf("%w: ref %s: first seq %d after last seq %d", ErrInvalid, r.StreamID, r.FirstSeq, r.LastSeq)
	}
	if r.Bytes < 0 {
		return fmt.Errorf("%w: ref %s@%d: negative bytes", ErrInvalid, r.StreamID, r.FirstSeq)
	}
	if len(r.Locations) == 0 {
		return fmt.Errorf("%w: ref %s@%d: no locations", ErrInvalid, r.StreamID, r.FirstSeq)
	}
	for i, l := range r.Locations {
		if l.Key == "" || l.Offset < 0 || l.Length < 0 {
			return fmt.Errorf("%w: ref %s@%d: location %d: empty key or negative offset/length", ErrInvalid, r.StreamID, r.FirstSeq, i)
		}
	}
	if r.Commands != nil {
		if err := r.Commands.Validate(); err != nil {
			return fmt.Errorf("%w: ref %s@%d: %v", ErrInvalid, r.StreamID, r.FirstSeq, err)
		}
	}
	return validateMarks(r)
}

// ValidatePutRefs checks a PutRefs batch: every ref valid and at most
// MaxRefBytes (ErrTooLarge), and no two refs with the same stream id and
// first seq (DynamoDB refuses duplicate keys in one batch).
func ValidatePutRefs(refs []Ref) error {
	for _, r := range refs {
		if err := CheckRefSize(r); err != nil {
			return err
		}
	}
	return validateRefKeys(refs)
}

// validateRefKeys checks that every ref is valid and no key is given twice.
func validateRefKeys(refs []Ref) error {
	type key struct {
		id  string
		seq uint64
	}
	seen := make(map[key]bool, len(refs))
	for _, r := range refs {
		if err := ValidateRef(r); err != nil {
			return err
		}
		k := key{r.StreamID, r.FirstSeq}
		if seen[k] {
			return fmt.Errorf("%w: ref %s@%d given twice", ErrInvalid, r.StreamID, r.FirstSeq)
		}
		seen[k] = true
	}
	return nil
}

// ValidateDeleteRefs checks a DeleteRefs batch: every ref valid, no key
// twice. Size is not checked: deleting a ref an older build stored larger
// than MaxRefBytes must work.
func ValidateDeleteRefs(refs []Ref) error { return validateRefKeys(refs) }

// DeleteOn is DeleteRefs' decision for one ref: nil when the stored ref
// (found reports whether there is one) may be deleted, that is when it is
// gone already (deletes are idempotent) or still exactly r (EqualRef);
// ErrConflict when it changed since it was read.
func DeleteOn(stored Ref, found bool, r Ref) error {
	if found && !EqualRef(stored, r) {
		return fmt.Errorf("delete ref %s@%d: it changed since it was read: %w", r.StreamID, r.FirstSeq, ErrConflict)
	}
	return nil
}

// RaiseFloorOn is RaiseFloor's decision on the stored stream s (found
// reports whether there is one): the stream to store and whether it
// changed, or ErrNotFound (no stream of that name) or ErrConflict (another
// id: the name was recreated). A floor at or below the stored one changes
// nothing: the floor only grows.
// SetConfigOn is SetStreamConfig on s (found: it exists): the pure core
// the in-process stores share.
func SetConfigOn(s Stream, found bool, name, id string, retentionMs int64, ts Timestamping) (Stream, error) {
	switch {
	case retentionMs < 0 || ts.Mode > TimestampArrival:
		return s, fmt.Errorf("%w: set the config of stream %q: retention %d ms, timestamp mode %d", ErrInvalid, name, retentionMs, ts.Mode)
	case !found:
		return s, fmt.Errorf("set the config of stream %q: %w", name, ErrNotFound)
	case s.ID != id:
		return s, fmt.Errorf("set the config of stream %q: id is %s, not %s: %w", name, s.ID, id, ErrConflict)
	}
	s.RetentionMs, s.Timestamping = retentionMs, ts
	return s, nil
}

// MoveStreamOn is MoveStream on s (found: it exists): the pure core the
// in-process stores share. It returns the stream to store and whether it
// changed.
func MoveStreamOn(s Stream, found bool, name, id, from, to string) (Stream, bool, error) {
	switch {
	case from == "" || to == "":
		return s, false, fmt.Errorf("%w: move stream %q from star %q to star %q: a star id is empty", ErrInvalid, name, from, to)
	case !found || s.State != StreamActive:
		return s, false, fmt.Errorf("move stream %q: %w", name, ErrNotFound)
	case s.ID != id:
		return s, false, fmt.Errorf("move stream %q: id is %s, not %s: %w", name, s.ID, id, ErrConflict)
	case s.Star == to:
		return s, false, nil
	case s.Star != from:
		return s, false, fmt.Errorf("move stream %q from star %s: it is led by %s: %w", name, from, s.Star, ErrConflict)
	}
	s.Star, s.From = to, from
	return s, true, nil
}

func RaiseFloorOn(s Stream, found bool, name, id string, floor uint64) (Stream, bool, error) {
	switch {
	case !found:
		return s, false, fmt.Errorf("raise the floor of stream %q: %w", name, ErrNotFound)
	case s.ID != id:
		return s, false, fmt.Errorf("raise the floor of stream %q: id is %s, not %s: %w", name, s.ID, id, ErrConflict)
	case floor <= s.Floor:
		return s, false, nil
	}
	s.Floor = floor
	return s, true, nil
}

// ValidateSwap checks the arguments of SwapRefs: repl at most MaxRefBytes
// (ErrTooLarge; the old refs may be larger, stored by an older build), 1 to
// MaxSwapRefs old refs,
// all valid and of repl's stream, in seq order and adjacent (each starts
// right after the previous one ends), and repl valid and covering exactly
// their union: repl.FirstSeq == old[0].FirstSeq and repl.LastSeq ==
// old[len(old)-1].LastSeq.
func ValidateSwap(old []Ref, repl Ref) error {
	if len(old) == 0 || len(old) > MaxSwapRefs {
		return fmt.Errorf("%w: swap of %d refs, want 1 to %d", ErrInvalid, len(old), MaxSwapRefs)
	}
	if err := ValidateRef(repl); err != nil {
		return err
	}
	if err := CheckRefSize(repl); err != nil {
		return err
	}
	if err := validateReplaced("swap", old, repl); err != nil {
		return err
	}
	if repl.FirstSeq != old[0].FirstSeq || repl.LastSeq != old[len(old)-1].LastSeq {
		return fmt.Errorf("%w: swap: replacement covers %d-%d, old refs cover %d-%d", ErrInvalid,
			repl.FirstSeq, repl.LastSeq, old[0].FirstSeq, old[len(old)-1].LastSeq)
	}
	return nil
}

// ValidateSettleRef checks SettleRef's arguments: repl a valid ref within
// the bounds of a written ref; old 0 to MaxSettleOldRefs valid refs of
// repl's stream (DynamoDB's transaction also holds the head's
// ConditionCheck and SettleApart's, so more would pass its 100 actions),
// adjacent and in seq order;
// with old refs, repl starts where they
// start and reaches at least as far (it extends them with what settle
// moved out of the pass index window).
func ValidateSettleRef(old []Ref, repl Ref) error {
	if len(old) > MaxSettleOldRefs {
		return fmt.Errorf("%w: settle of %d old refs, want at most %d", ErrInvalid, len(old), MaxSettleOldRefs)
	}
	if err := ValidateRef(repl); err != nil {
		return err
	}
	if err := CheckRefSize(repl); err != nil {
		return err
	}
	if err := validateReplaced("settle", old, repl); err != nil {
		return err
	}
	if len(old) > 0 && (repl.FirstSeq != old[0].FirstSeq || repl.LastSeq < old[len(old)-1].LastSeq) {
		return fmt.Errorf("%w: settle: replacement covers %d-%d, old refs cover %d-%d", ErrInvalid,
			repl.FirstSeq, repl.LastSeq, old[0].FirstSeq, old[len(old)-1].LastSeq)
	}
	return nil
}

// validateReplaced checks the refs a write replaces: valid refs of repl's
// stream, adjacent, in seq order.
func validateReplaced(what string, old []Ref, repl Ref) error {
	for i, r := range old {
		if err := ValidateRef(r); err != nil {
			return err
		}
		if r.StreamID != repl.StreamID {
			return fmt.Errorf("%w: %s: ref of stream %s replaced by a ref of stream %s", ErrInvalid, what, r.StreamID, repl.StreamID)
		}
		if i > 0 && (old[i-1].LastSeq == ^uint64(0) || r.FirstSeq != old[i-1].LastSeq+1) {
			return fmt.Errorf("%w: %s: ref at %d does not follow the ref ending at %d", ErrInvalid, what, r.FirstSeq, old[i-1].LastSeq)
		}
	}
	return nil
}

// SettleCurrent reports whether h lets a settle step from `at` write refs:
// ErrConflict unless h.Settled == at.
func SettleCurrent(h Head, at Cursor) error {
	if h.Settled != at {
		return fmt.Errorf("settle ref of the step from %s: the settled cursor is %s: %w", at, h.Settled, ErrConflict)
	}
	return nil
}

// SettleOn decides SettleRef's condition on the stored refs: with old
// refs, each must be stored exactly as given (stored(i) is old[i]'s stored
// ref and whether there is one); without, the ref stored at repl's key
// (stored(-1)) must be absent or exactly repl (a rerun). ErrConflict
// otherwise.
func SettleOn(old []Ref, repl Ref, stored func(i int) (Ref, bool)) error {
	if len(old) == 0 {
		if cur, ok := stored(-1); ok && !EqualRef(cur, repl) {
			return fmt.Errorf("settle ref of stream %s at %d: another ref is stored there: %w", repl.StreamID, repl.FirstSeq, ErrConflict)
		}
		return nil
	}
	for i, o := range old {
		if cur, ok := stored(i); !ok || !EqualRef(cur, o) {
			return fmt.Errorf("settle ref of stream %s: ref at %d changed or gone: %w", o.StreamID, o.FirstSeq, ErrConflict)
		}
	}
	return nil
}

// SettleReach is the last key SettleRef replaces or writes (old's last
// ref's key, or repl's own without old): the keys above it up to repl's
// last seq must hold no ref (SettleApart).
func SettleReach(old []Ref, repl Ref) uint64 {
	if len(old) > 0 {
		return old[len(old)-1].FirstSeq
	}
	return repl.FirstSeq
}

// SettleApart decides SettleRef's condition on repl's neighbours, which
// keeps a stream's refs apart (none holds a seq another holds) whatever
// the settings of the copies that flush one step (two copies of which
// one merges the previous ref and one does not: design 014, "Level 1 as
// built"): before, the stored ref with the greatest key below repl's
// first seq (hasBefore false: none), must end below it; next, the stored
// ref with the smallest key above SettleReach (hasNext false: none), must
// start past repl's last seq. ErrConflict otherwise.
func SettleApart(repl Ref, before Ref, hasBefore bool, next Ref, hasNext bool) error {
	if hasBefore && before.LastSeq >= repl.FirstSeq {
		return fmt.Errorf("settle ref of stream %s at %d-%d: the ref at %d holds seqs to %d: %w",
			repl.StreamID, repl.FirstSeq, repl.LastSeq, before.FirstSeq, before.LastSeq, ErrConflict)
	}
	if hasNext && next.FirstSeq <= repl.LastSeq {
		return fmt.Errorf("settle ref of stream %s at %d-%d: a ref is stored at %d: %w",
			repl.StreamID, repl.FirstSeq, repl.LastSeq, next.FirstSeq, ErrConflict)
	}
	return nil
}

// EqualRef reports whether a and b are the same ref, field by field; nil and
// empty Locations are equal. SwapRefs uses it to decide that a stored ref is
// "still exactly as given".
func EqualRef(a, b Ref) bool {
	if a.StreamID != b.StreamID || a.FirstSeq != b.FirstSeq || a.LastSeq != b.LastSeq ||
		a.FirstTsMs != b.FirstTsMs || a.LastTsMs != b.LastTsMs || a.Bytes != b.Bytes ||
		len(a.Locations) != len(b.Locations) {
		return false
	}
	for i := range a.Locations {
		if a.Locations[i] != b.Locations[i] {
			return false
		}
	}
	if (a.Commands == nil) != (b.Commands == nil) || (a.Commands != nil && *a.Commands != *b.Commands) {
		return false
	}
	return slices.Equal(a.Producers, b.Producers) && slices.Equal(a.Carried, b.Carried) && a.CarriedBelow == b.CarriedBelow
}

// ValidateChain checks a chain id: a non-empty star without '#' and a known
// class.
func ValidateChain(c ChainID) error {
	if err := validateStar(c.Star); err != nil {
		return err
	}
	return validateClass(c.Class)
}

// ValidateCursorKind checks that k is Checkpoint, Settled, Trimmed,
// Flushed, Merged or Indexed.
func ValidateCursorKind(k CursorKind) error {
	if k != Checkpoint && k != Settled && k != Trimmed && k != Flushed && k != Merged && k != Indexed {
		return fmt.Errorf("%w: unknown cursor kind %d", ErrInvalid, k)
	}
	return nil
}

// ValidateAdvance checks AdvanceCursor's arguments: a known kind and to
// strictly after from.
func ValidateAdvance(kind CursorKind, from, to Cursor) error {
	if err := ValidateCursorKind(kind); err != nil {
		return err
	}
	if !from.Less(to) {
		return fmt.Errorf("%w: %s cursor move from %s to %s is not forward", ErrInvalid, kind, from, to)
	}
	if kind == Indexed && !from.IsZero() {
		return fmt.Errorf("%w: the indexed cursor is set once, from 0/0 (asked to move it from %s)", ErrInvalid, from)
	}
	return nil
}

// ValidatePass checks the pass argument of PutRefs: a lease target, which
// is never the zero Cursor.
func ValidatePass(pass Cursor) error {
	if pass.IsZero() {
		return fmt.Errorf("%w: put refs outside an absorb pass (zero pass cursor)", ErrInvalid)
	}
	return nil
}

// ValidateBeginAbsorb checks BeginAbsorb's arguments: to strictly after
// from.
func ValidateBeginAbsorb(from, to Cursor) error {
	if !from.Less(to) {
		return fmt.Errorf("%w: absorb pass from %s to %s is not forward", ErrInvalid, from, to)
	}
	return nil
}

// BeginAbsorbOn is BeginAbsorb's decision on the stored head h: the head to
// store, or ErrConflict (the checkpoint is not from, or another pass from
// it holds the lease; the caller reads h.Absorbing to complete that pass).
// Arguments must be valid (ValidateBeginAbsorb). Implementations that hold
// the head under a lock use it; DynamoDB states it as a condition.
func BeginAbsorbOn(h Head, from, to Cursor) (Head, error) {
	switch {
	case h.Checkpoint != from:
		return h, fmt.Errorf("begin absorb from %s: checkpoint is at %s: %w", from, h.Checkpoint, ErrConflict)
	case !h.Absorbing.IsZero() && h.Absorbing != to:
		return h, fmt.Errorf("begin absorb %s-%s: pass to %s holds the lease: %w", from, to, h.Absorbing, ErrConflict)
	}
	h.Absorbing = to
	return h, nil
}

// AdvanceOn is AdvanceCursor's decision on the stored head h: the head to
// store, or ErrConflict. The cursor of kind must be at from. For the
// checkpoint, a pass that holds the lease must be the one completing:
// Absorbing must be zero or to, and the move clears it. The indexed
// cursor is set (from zero) only while no pass holds the lease and only to
// the checkpoint itself. Arguments must be valid (ValidateAdvance).
func AdvanceOn(h Head, kind CursorKind, from, to Cursor) (Head, error) {
	if cur := h.Cursor(kind); cur != from {
		return h, fmt.Errorf("advance %s cursor from %s: it is at %s: %w", kind, from, cur, ErrConflict)
	}
	if kind == Checkpoint {
		if !h.Absorbing.IsZero() && h.Absorbing != to {
			return h, fmt.Errorf("advance checkpoint from %s to %s: pass to %s holds the lease: %w", from, to, h.Absorbing, ErrConflict)
		}
		h.Absorbing = Cursor{}
	}
	if kind == Indexed {
		switch {
		case !h.Absorbing.IsZero():
			return h, fmt.Errorf("set the indexed cursor to %s: pass to %s holds the lease: %w", to, h.Absorbing, ErrConflict)
		case h.Checkpoint != to:
			return h, fmt.Errorf("set the indexed cursor to %s: the checkpoint is at %s: %w", to, h.Checkpoint, ErrConflict)
		}
	}
	return SetCursor(h, kind, to), nil
}

// PassCurrent reports whether h lets pass write refs: ErrConflict unless
// h.Absorbing == pass.
func PassCurrent(h Head, pass Cursor) error {
	if h.Absorbing != pass {
		return fmt.Errorf("put refs of pass to %s: the lease is %s (zero: no pass): %w", pass, h.Absorbing, ErrConflict)
	}
	return nil
}

// SetCursor returns h with its cursor of kind k set to c. It panics on an
// unknown kind (check with ValidateCursorKind first).
func SetCursor(h Head, k CursorKind, c Cursor) Head {
	switch k {
	case Checkpoint:
		h.Checkpoint = c
	case Settled:
		h.Settled = c
	case Trimmed:
		h.Trimmed = c
	case Flushed:
		h.Flushed = c
	case Merged:
		h.Merged = c
	case Indexed:
		h.Indexed = c
	default:
		panic(fmt.Sprintf("metastore: unknown cursor kind %d", k))
	}
	return h
}

// NewHead is the head MintEpoch creates with a chain's first epoch: Epoch
// is epoch and every cursor is at {epoch, 0}, except Merged: zero (no
// merged run yet).
func NewHead(epoch uint64) Head {
	c := Cursor{Epoch: epoch, Slot: 0}
	return Head{Epoch: epoch, Checkpoint: c, Settled: c, Trimmed: c, Flushed: c}
}

// ValidateMint checks MintEpoch's arguments: e.Epoch > prev, State
// EpochActive, 1 <= W <= K, K buckets (non-empty names), Window >= 1 and Cut
// 0.
func ValidateMint(prev uint64, e Epoch) error {
	switch {
	case e.Epoch <= prev:
		return fmt.Errorf("%w: mint epoch %d after %d", ErrInvalid, e.Epoch, prev)
	case e.State != EpochActive:
		return fmt.Errorf("%w: epoch %d minted in state %d, want active", ErrInvalid, e.Epoch, e.State)
	case e.K < 1 || e.W < 1 || e.W > e.K:
		return fmt.Errorf("%w: epoch %d: K=%d W=%d, want 1 <= W <= K", ErrInvalid, e.Epoch, e.K, e.W)
	case len(e.Buckets) != e.K:
		return fmt.Errorf("%w: epoch %d: %d buckets for K=%d", ErrInvalid, e.Epoch, len(e.Buckets), e.K)
	case e.Window < 1:
		return fmt.Errorf("%w: epoch %d: window %d, want >= 1", ErrInvalid, e.Epoch, e.Window)
	case e.Cut != 0:
		return fmt.Errorf("%w: epoch %d minted with cut %d", ErrInvalid, e.Epoch, e.Cut)
	}
	for _, b := range e.Buckets {
		if b == "" {
			return fmt.Errorf("%w: epoch %d: empty bucket name", ErrInvalid, e.Epoch)
		}
	}
	return nil
}

// CheckEpochSize refuses an epoch whose item would be over MaxItemBytes
// (ErrTooLarge).
func CheckEpochSize(c ChainID, e Epoch) error {
	return checkItem(fmt.Sprintf("epoch %d of chain %s", e.Epoch, c), EpochSize(c, e))
}

// ValidateEpochUpdate checks UpdateEpoch's states: only an active epoch is
// updated (from must be EpochActive: a fenced epoch and its cut are final),
// to EpochActive or EpochFenced.
func ValidateEpochUpdate(from EpochState, e Epoch) error {
	if from != EpochActive {
		return fmt.Errorf("%w: epoch %d: update from state %d, only an active epoch changes", ErrInvalid, e.Epoch, from)
	}
	if e.State != EpochActive && e.State != EpochFenced {
		return fmt.Errorf("%w: epoch %d: unknown state %d", ErrInvalid, e.Epoch, e.State)
	}
	return nil
}

// ValidateTokenHash checks a token hash: 64 lowercase hex digits (sha256).
func ValidateTokenHash(hash string) error {
	if !isLowerHex(hash, 64) {
		return fmt.Errorf("%w: token hash %q is not 64 lowercase hex digits", ErrInvalid, hash)
	}
	return nil
}

// ValidateToken checks a token: a valid hash, a prefix that is "" or a
// valid name prefix, no empty operation names, and a description of at most
// MaxTokenDescriptionLen bytes of UTF-8 without control characters
// (ErrInvalid), times not negative; and an item of at most MaxItemBytes
// (ErrTooLarge).
func ValidateToken(t Token) error {
	if err := ValidateTokenHash(t.Hash); err != nil {
		return err
	}
	if t.Prefix != "" {
		if err := ValidateStreamName(t.Prefix); err != nil {
			return fmt.Errorf("token prefix: %w", err)
		}
	}
	if t.Parent != "" {
		if err := ValidateTokenHash(t.Parent); err != nil {
			return fmt.Errorf("token parent: %w", err)
		}
	}
	for _, op := range t.Ops {
		if op == "" {
			return fmt.Errorf("%w: token: empty operation name", ErrInvalid)
		}
	}
	if t.ExpiresMs < 0 || t.RevokedMs < 0 {
		return fmt.Errorf("%w: token: negative expiry or revocation time", ErrInvalid)
	}
	if t.MaxStreams < 0 || t.AppendBytesPerSec < 0 || (!t.StartsTenant && (t.MaxStreams != 0 || t.AppendBytesPerSec != 0)) {
		return fmt.Errorf("%w: token: quotas %d streams, %d bytes/s: negative, or on a token that does not start a tenant", ErrInvalid, t.MaxStreams, t.AppendBytesPerSec)
	}
	if len(t.Description) > MaxTokenDescriptionLen || !utf8.ValidString(t.Description) ||
		strings.IndexFunc(t.Description, unicode.IsControl) >= 0 {
		return fmt.Errorf("%w: token description: at most %d bytes of UTF-8 without control characters", ErrInvalid, MaxTokenDescriptionLen)
	}
	return checkItem(fmt.Sprintf("token %.8s...", t.Hash), TokenSize(t))
}

func validateClass(c Class) error {
	if c != Standard && c != Express {
		return fmt.Errorf("%w: unknown class %d", ErrInvalid, c)
	}
	return nil
}

func validateStar(star string) error {
	if star == "" || len(star) > MaxStarLen || strings.ContainsAny(star, "#") || !utf8.ValidString(star) ||
		strings.IndexFunc(star, unicode.IsControl) >= 0 {
		return fmt.Errorf("%w: star id %.64q: want 1 to %d bytes, no '#', no control characters", ErrInvalid, star, MaxStarLen)
	}
	return nil
}

func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
