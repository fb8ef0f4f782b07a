package metastore

import (
	"context"
	"errors"
	"fmt"

	"github.com/strandlog/strand/shared/format"
)

// Sentinel errors, matched with errors.Is.
var (
	ErrNotFound = errors.New("metastore: not found")
	ErrExists   = errors.New("metastore: already exists")
	ErrConflict = errors.New("metastore: condition failed")
	ErrInvalid  = errors.New("metastore: invalid argument")
	// ErrUnavailable: throttled, timed out or down; nothing is known to have
	// changed, and the caller may retry.
	ErrUnavailable = errors.New("metastore: unavailable")
)

// Class is a stream's storage class, fixed for the stream's life.
type Class uint8

const (
	Standard Class = 1
	Express  Class = 2
)

func (c Class) String() string {
	switch c {
	case Standard:
		return "standard"
	case Express:
		return "express"
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// ParseClass parses "standard" or "express".
func ParseClass(s string) (Class, error) {
	switch s {
	case "standard", "STANDARD", "Standard":
		return Standard, nil
	case "express", "EXPRESS", "Express":
		return Express, nil
	}
	return 0, fmt.Errorf("%w: unknown class %q (want standard or express)", ErrInvalid, s)
}

// StreamState is a stream's lifecycle state.
type StreamState uint8

const (
	StreamActive   StreamState = 1
	StreamDeleting StreamState = 2
)

// Stream is the STREAM#<name>/META item.
type Stream struct {
	Name      string
	ID        string // 32 lowercase hex digits (16 random bytes)
	Class     Class
	Star      string // leader star id
	CreatedMs int64
	// RetentionMs is the age after which settled data is trimmed; 0 keeps forever.
	RetentionMs int64
	State       StreamState
	// Floor is the lowest next seq the stream may ever have again: every
	// seq below it was acknowledged once. Trim raises it (RaiseFloor)
	// before it deletes refs, and a star that opens the stream starts its
	// tail at max(last ref's LastSeq+1, Floor), so a stream's tail never
	// moves backward whatever happens to its refs. 0: no floor. Only
	// RaiseFloor changes it (CreateStream stores what it is given).
	Floor uint64
	// Timestamping is how the stream's records get their timestamps (the
	// zero value: client-prefer, capped).
	Timestamping Timestamping
	// From is the star that led the stream before its last move (ADR
	// 0065; "": never moved). Its chain's pass index window may still
	// hold the stream's parts until settle flushes them into refs, so
	// the window reads both chains. Only MoveStream sets it.
	From string `json:",omitempty"`
}

// TimestampMode says where a record's timestamp comes from.
type TimestampMode uint8

// Timestamp modes (stored: do not renumber).
const (
	// TimestampClientPrefer: the client's timestamp when it gives one
	// (not 0), else the arrival time. The default.
	TimestampClientPrefer TimestampMode = 0
	// TimestampClientRequire: every record must carry a client timestamp;
	// a batch with a record without one is refused.
	TimestampClientRequire TimestampMode = 1
	// TimestampArrival: the arrival time, whatever the client gives.
	TimestampArrival TimestampMode = 2
)

// Timestamping is a stream's timestamp policy.
type Timestamping struct {
	Mode TimestampMode
	// Uncapped lets a client timestamp be later than the arrival time.
	// Capped (false, the default), such a timestamp becomes the arrival
	// time, so that one far-future record cannot pin every later record
	// of the stream (timestamps never decrease) to its timestamp.
	Uncapped bool
}

// Location is where one part of a ref's bytes lives.
type Location struct {
	// Settled is true for a settled object in the settled bucket, false for
	// a transit segment in a chain slot (held by every bucket of the set).
	Settled bool
	Key     string // object key
	Offset  int64  // object-absolute
	Length  int64
	// FirstSeq is the seq of the location's first record, so that a read
	// from the middle of a ref skips the locations that end before it
	// without fetching them. 0 with a predecessor location means unknown:
	// the reader then reads the location to find out.
	FirstSeq uint64
}

// Ref is the SID#<id>/REF#<first-seq> item: a stream's seq range and the
// byte ranges that hold it, in seq order.
type Ref struct {
	StreamID  string
	FirstSeq  uint64
	LastSeq   uint64 // inclusive
	FirstTsMs int64
	LastTsMs  int64
	Bytes     int64
	Locations []Location
	// Producers are the idempotent producer batches the ref remembers (see
	// ProducerMark), in seq order; nil for refs without any.
	Producers []ProducerMark `json:",omitempty"`
	// Carried is the newest carried table among the ref's segments (ADR
	// 0062): the producer marks of acknowledged batches the star
	// remembered when it cut the flight that carried it, in seq order,
	// below CarriedBelow, distinct, bounded as Producers (TrimMarks). A
	// successor star takes the union of its last refs' Producers and
	// Carried (star.RecoverStream). nil when none.
	Carried []ProducerMark `json:",omitempty"`
	// CarriedBelow is the stream's acknowledged tail when the star took
	// the carried table (at most LastSeq+1; 0 without a table): batches at
	// or above it are in the own marks of the parts holding them.
	CarriedBelow uint64 `json:",omitempty"`
	// Commands is the stream's command state (fencing token, trim point)
	// as of the ref's last record, as the flight's command table gave it
	// (format version 3); nil when the stream had no command record by
	// then. A successor star seeds the stream's state from its last ref.
	Commands *format.StreamCommands `json:",omitempty"`
}

// ChainID names one loglet: a star's chain of one class.
type ChainID struct {
	Star  string
	Class Class
}

func (c ChainID) String() string { return c.Star + "/" + c.Class.String() }

// Cursor is a position on a chain: the next slot to process in an epoch.
// Cursors order by (Epoch, Slot).
type Cursor struct {
	Epoch uint64
	Slot  uint64
}

// Less reports whether c is before d.
func (c Cursor) Less(d Cursor) bool {
	return c.Epoch < d.Epoch || (c.Epoch == d.Epoch && c.Slot < d.Slot)
}

func (c Cursor) String() string { return fmt.Sprintf("%d/%d", c.Epoch, c.Slot) }

// IsZero reports whether c is the zero Cursor (as Head.Absorbing: no pass
// in progress). No lease target is ever zero: a target is after a cursor.
func (c Cursor) IsZero() bool { return c == Cursor{} }

// CursorKind selects one of a head's cursors.
type CursorKind uint8

const (
	Checkpoint CursorKind = 1 // absorbed into refs below this
	Settled    CursorKind = 2 // settled into settled objects below this
	Trimmed    CursorKind = 3 // deleted from the chain buckets below this
	// Flushed: with the pass index's runs (design 014, level 1), every
	// record in a slot below this is behind a ref; [Flushed, Settled) is
	// in runs. Settle moves it, never past Settled.
	Flushed CursorKind = 4
	// Merged: with level 2 of the pass index (design 014, "Level 2 as
	// built"), the end of the last merged run the head names: a walk of
	// the runs reads, at a slot below it, the merged run there (else the
	// level-1 run). Zero until the first merge (a head stored before it
	// existed reads as zero too). Settle moves it, never past Settled.
	Merged CursorKind = 5
	// Indexed: where the chain's indexed passes begin (design 014,
	// "Switching a live chain"): every absorb pass from it on writes a
	// pass index, every one before it wrote refs; zero: none (refs
	// mode). Set once, from zero, only while no pass holds the absorb
	// lease and only to the checkpoint itself (AdvanceOn): every pass
	// begun after it starts at or after it.
	Indexed CursorKind = 6
)

func (k CursorKind) String() string {
	switch k {
	case Checkpoint:
		return "checkpoint"
	case Settled:
		return "settled"
	case Trimmed:
		return "trimmed"
	case Flushed:
		return "flushed"
	case Merged:
		return "merged"
	case Indexed:
		return "indexed"
	}
	return fmt.Sprintf("cursor(%d)", uint8(k))
}

// CursorMove is one cursor's part of a MoveCursors: the cursor of kind
// Kind must be at From, and becomes To (To == From: a condition only).
type CursorMove struct {
	Kind     CursorKind
	From, To Cursor
}

func (m CursorMove) String() string {
	if m.From == m.To {
		return fmt.Sprintf("%s at %s", m.Kind, m.From)
	}
	return fmt.Sprintf("%s %s->%s", m.Kind, m.From, m.To)
}

// Head is the CHAIN#<star>#<class>/HEAD item.
type Head struct {
	Epoch      uint64 // current (latest minted) epoch
	Checkpoint Cursor
	Settled    Cursor
	Trimmed    Cursor
	// Flushed: below it every record is behind a ref (design 014, level
	// 1: runs are [Flushed, Settled)). A head stored before it existed
	// reads as the zero Cursor.
	Flushed Cursor
	// Merged: the end of the last merged run (design 014, level 2); zero
	// before the first merge and on a head stored before it existed.
	Merged Cursor
	// Indexed: passes from it on are indexed, passes before it wrote
	// refs (design 014, "Switching a live chain"). The zero Cursor (a
	// head stored before it existed, or a chain never indexed): none.
	Indexed Cursor
	// Absorbing is the target of the absorb pass in progress: the pass
	// [Checkpoint, Absorbing) holds the lease (BeginAbsorb), and only it may
	// write refs (PutRefs) or move the checkpoint (AdvanceCursor). The zero
	// Cursor means no pass is in progress.
	Absorbing Cursor
}

// Cursor returns the cursor of kind k.
func (h Head) Cursor(k CursorKind) Cursor {
	switch k {
	case Checkpoint:
		return h.Checkpoint
	case Settled:
		return h.Settled
	case Trimmed:
		return h.Trimmed
	case Flushed:
		return h.Flushed
	case Merged:
		return h.Merged
	case Indexed:
		return h.Indexed
	}
	panic(fmt.Sprintf("metastore: unknown cursor kind %d", k))
}

// EpochState is an epoch's lifecycle state.
type EpochState uint8

const (
	EpochActive EpochState = 1 // its writer may be committing slots
	EpochFenced EpochState = 2 // fenced: Cut is final
)

// Epoch is the CHAIN#<star>#<class>/EPOCH#<epoch> item.
type Epoch struct {
	Epoch   uint64
	State   EpochState
	K, W    int
	Buckets []string
	Window  int      // pipeline window: at most this many slots assigned and unreleased
	Nonce   [16]byte // writer nonce of the epoch's writer
	Cut     uint64   // first slot not committed; valid when State is EpochFenced
}

// Token is a hashed bearer token's grant.
type Token struct {
	Hash   string // sha256 hex of the secret
	Prefix string // stream-name prefix it is scoped to ("" = all)
	Ops    []string
	// Description is free text for people (who holds it, what for); at
	// most MaxTokenDescriptionLen bytes of UTF-8 without control characters.
	Description string
	// ExpiresMs: the token is refused from this time on (Unix ms); 0:
	// never.
	ExpiresMs int64
	// RevokedMs: when the token was revoked (Unix ms); 0: it is not. A
	// revoked token is kept (a tombstone), so that its use is refused as
	// revoked rather than unknown.
	RevokedMs int64
	// Parent is the hash of the token that created this one ("": a root
	// token, issued by an operator). A token is void once any ancestor is
	// revoked or expired; its tenant is its root (auth.Grant.Tenant) or
	// its nearest ancestor that starts a tenant.
	Parent string
	// StartsTenant: the token and the tokens minted under it are a tenant
	// of their own (auth.Grant.Tenant), with quotas MaxStreams and
	// AppendBytesPerSec (0: the star's; ADR 0060). Set at creation only.
	StartsTenant      bool  `json:",omitempty"`
	MaxStreams        int64 `json:",omitempty"`
	AppendBytesPerSec int64 `json:",omitempty"`
}

// Store is the metastore contract. See the package documentation.
type Store interface {
	CreateStream(ctx context.Context, s Stream) (Stream, error)
	GetStream(ctx context.Context, name string) (Stream, error)
	ListStreams(ctx context.Context, prefix, startAfter string, limit int) (streams []Stream, next string, err error)
	// SetStreamState sets a stream's state. StreamDeleting retires the
	// name: the stream leaves it (GetStream and ListStreams no longer find
	// it, CreateStream may take the name for a new stream at once) for
	// the deleting streams (ListDeleting), in one atomic write.
	SetStreamState(ctx context.Context, name, id string, state StreamState) error
	// ListDeleting lists the deleting streams (state StreamDeleting, off
	// their names) with id > startAfter, in id order, at most limit;
	// next as ListStreams'.
	ListDeleting(ctx context.Context, startAfter string, limit int) (streams []Stream, next string, err error)
	// SetStreamConfig records a stream's retention and timestamping after
	// a ReconfigureStream (the config command record in the stream is the
	// sequenced truth; this keeps GetStream, ListStreams and trim in step).
	// ErrNotFound for a missing stream, ErrConflict for another id.
	SetStreamConfig(ctx context.Context, name, id string, retentionMs int64, ts Timestamping) error
	// MoveStream makes star to the leader of the stream named name (ADR
	// 0065), on condition that it has id, is active and is led by from:
	// ErrNotFound for a missing or deleting stream, ErrConflict for
	// another id or another leader (the error names it). A stream led by
	// to already is left as it is (a retry). The caller has sealed the
	// stream on from first: this write follows the seal, never leads it.
	MoveStream(ctx context.Context, name, id, from, to string) error
	// DeleteStream removes the deleting stream id (trim, once its refs
	// are gone), and a stream named name with that id (a stream marked
	// deleting in place, before names were retired). A name that holds
	// another id is left alone.
	DeleteStream(ctx context.Context, name, id string) error

	PutRefs(ctx context.Context, chain ChainID, pass Cursor, refs []Ref) error
	QueryRefs(ctx context.Context, streamID string, fromSeq uint64, limit int) ([]Ref, error)
	LastRef(ctx context.Context, streamID string) (Ref, error)
	// RefsBefore returns up to limit refs of the stream that start before
	// beforeSeq, newest first: one Query page read backward, cut at limit
	// and at MaxQueryBytes (QueryPage), so a page may be short while older
	// refs remain; continue before the page's last (oldest) ref's
	// FirstSeq. Only an empty page ends a listing. For the walks back from
	// a stream's end (star.RecoverStream) in pages, not a Query a ref.
	RefsBefore(ctx context.Context, streamID string, beforeSeq uint64, limit int) ([]Ref, error)
	SwapRefs(ctx context.Context, old []Ref, repl Ref) error
	SettleRef(ctx context.Context, chain ChainID, settled Cursor, old []Ref, repl Ref) error
	DeleteRefs(ctx context.Context, refs []Ref) error
	RaiseFloor(ctx context.Context, name, id string, floor uint64) error

	GetHead(ctx context.Context, chain ChainID) (Head, error)
	BeginAbsorb(ctx context.Context, chain ChainID, from, to Cursor) (Head, error)
	AdvanceCursor(ctx context.Context, chain ChainID, kind CursorKind, from, to Cursor) error
	// MoveCursors moves several of a chain's cursors in one conditional
	// write: every move's cursor must be at its From (a move with To ==
	// From is a condition only), and then each is set to its To, all or
	// none (ErrConflict: none moved). It is settle's one commit point per
	// step (design 014, "One commit point per step"). Moves must be valid
	// (ValidateMoves: ErrInvalid, nothing changed).
	MoveCursors(ctx context.Context, chain ChainID, moves []CursorMove) error

	MintEpoch(ctx context.Context, chain ChainID, prev uint64, e Epoch) error
	GetEpoch(ctx context.Context, chain ChainID, epoch uint64) (Epoch, error)
	UpdateEpoch(ctx context.Context, chain ChainID, from EpochState, e Epoch) error

	PutToken(ctx context.Context, t Token) error
	GetToken(ctx context.Context, hash string) (Token, error)
	DeleteToken(ctx context.Context, hash string) error
	ListTokens(ctx context.Context, prefix string) ([]Token, error)
}
