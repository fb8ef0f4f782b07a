package metacount

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/strandlog/strand/shared/metastore"
)

// Op is one method of metastore.Store.
type Op int

// The operations, one per method of metastore.Store.
const (
	CreateStream Op = iota
	GetStream
	ListStreams
	SetStreamState
	DeleteStream
	PutRefs
	QueryRefs
	LastRef
	SwapRefs
	DeleteRefs
	GetHead
	BeginAbsorb
	AdvanceCursor
	MintEpoch
	GetEpoch
	UpdateEpoch
	PutToken
	GetToken
	DeleteToken
	ListTokens
	RaiseFloor
	SettleRef
	ListDeleting
	MoveCursors
	RefsBefore
	numOps
)

var opNames = [numOps]string{
	CreateStream:   "CreateStream",
	GetStream:      "GetStream",
	ListStreams:    "ListStreams",
	SetStreamState: "SetStreamState",
	DeleteStream:   "DeleteStream",
	PutRefs:        "PutRefs",
	QueryRefs:      "QueryRefs",
	LastRef:        "LastRef",
	SwapRefs:       "SwapRefs",
	DeleteRefs:     "DeleteRefs",
	GetHead:        "GetHead",
	BeginAbsorb:    "BeginAbsorb",
	AdvanceCursor:  "AdvanceCursor",
	MintEpoch:      "MintEpoch",
	GetEpoch:       "GetEpoch",
	UpdateEpoch:    "UpdateEpoch",
	PutToken:       "PutToken",
	GetToken:       "GetToken",
	DeleteToken:    "DeleteToken",
	ListTokens:     "ListTokens",
	RaiseFloor:     "RaiseFloor",
	SettleRef:      "SettleRef",
	ListDeleting:   "ListDeleting",
	MoveCursors:    "MoveCursors",
	RefsBefore:     "RefsBefore",
}

var opWrites = [numOps]bool{
	CreateStream:   true,
	SetStreamState: true,
	DeleteStream:   true,
	PutRefs:        true,
	SwapRefs:       true,
	DeleteRefs:     true,
	BeginAbsorb:    true,
	AdvanceCursor:  true,
	MintEpoch:      true,
	UpdateEpoch:    true,
	PutToken:       true,
	DeleteToken:    true,
	RaiseFloor:     true,
	SettleRef:      true,
	MoveCursors:    true,
}

func (o Op) String() string {
	if o >= 0 && o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", int(o))
}

// Ops lists every operation, in order.
func Ops() []Op {
	out := make([]Op, numOps)
	for i := range out {
		out[i] = Op(i)
	}
	return out
}

// Write reports whether o changes the store (a conditional or plain write).
func (o Op) Write() bool { return o >= 0 && o < numOps && opWrites[o] }

// Store is a metastore.Store that counts every call, per method, and the
// refs PutRefs writes (each one a DynamoDB item write), then delegates to
// the wrapped store. Failed calls count too: they cost a request all the
// same. It is safe for concurrent use.
type Store struct {
	s        metastore.Store
	calls    [numOps]atomic.Int64
	refItems atomic.Int64
	// DynamoDB's bill of the calls (units.go).
	items, wru, rru atomic.Int64
}

// bill adds one call's units.
func (c *Store) bill(u Units) {
	c.items.Add(u.Items)
	c.wru.Add(u.WRU)
	c.rru.Add(u.RRU)
}

var _ metastore.Store = (*Store)(nil)

// New wraps s.
func New(s metastore.Store) *Store { return &Store{s: s} }

// Unwrap is the wrapped store.
func (c *Store) Unwrap() metastore.Store { return c.s }

// Counts is a snapshot of the counters.
type Counts struct {
	Calls [numOps]int64
	// RefItems is how many refs PutRefs was given: the item writes it costs
	// on DynamoDB (a transaction of n puts and one condition check is n+1
	// item writes; the check is counted in Calls[PutRefs]).
	RefItems int64
	// Units is what the calls cost on DynamoDB: item writes and request
	// units, by item size (units.go).
	Units
}

// Snapshot reads the counters.
func (c *Store) Snapshot() Counts {
	var out Counts
	for i := range out.Calls {
		out.Calls[i] = c.calls[i].Load()
	}
	out.RefItems = c.refItems.Load()
	out.Units = Units{Items: c.items.Load(), WRU: c.wru.Load(), RRU: c.rru.Load()}
	return out
}

// Reset zeroes the counters.
func (c *Store) Reset() {
	for i := range c.calls {
		c.calls[i].Store(0)
	}
	c.refItems.Store(0)
	c.items.Store(0)
	c.wru.Store(0)
	c.rru.Store(0)
}

// Of is the number of calls of o.
func (n Counts) Of(o Op) int64 { return n.Calls[o] }

// Total is the number of calls.
func (n Counts) Total() int64 {
	var t int64
	for _, v := range n.Calls {
		t += v
	}
	return t
}

// Writes is the number of calls that write.
func (n Counts) Writes() int64 {
	var t int64
	for o, v := range n.Calls {
		if Op(o).Write() {
			t += v
		}
	}
	return t
}

// Reads is the number of calls that only read.
func (n Counts) Reads() int64 { return n.Total() - n.Writes() }

// Sub is n minus m, counter by counter.
func (n Counts) Sub(m Counts) Counts {
	for i := range n.Calls {
		n.Calls[i] -= m.Calls[i]
	}
	n.RefItems -= m.RefItems
	n.Units = Units{n.Items - m.Items, n.WRU - m.WRU, n.RRU - m.RRU}
	return n
}

// String lists the non-zero counters, by name.
func (n Counts) String() string {
	var parts []string
	for o, v := range n.Calls {
		if v != 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", Op(o), v))
		}
	}
	sort.Strings(parts)
	if n.RefItems != 0 {
		parts = append(parts, fmt.Sprintf("refItems=%d", n.RefItems))
	}
	if n.Units != (Units{}) {
		parts = append(parts, fmt.Sprintf("items=%d WRU=%d RRU=%d", n.Items, n.WRU, n.RRU))
	}
	return strings.Join(parts, " ")
}

// CreateStream implements metastore.Store.
func (c *Store) CreateStream(ctx context.Context, s metastore.Stream) (metastore.Stream, error) {
	c.calls[CreateStream].Add(1)
	c.bill(tx(StreamItemBytes(s), StreamItemBytes(s)))
	return c.s.CreateStream(ctx, s)
}

// GetStream implements metastore.Store.
func (c *Store) GetStream(ctx context.Context, name string) (metastore.Stream, error) {
	c.calls[GetStream].Add(1)
	st, err := c.s.GetStream(ctx, name)
	c.bill(read(StreamItemBytes(st)))
	return st, err
}

// ListStreams implements metastore.Store.
func (c *Store) ListStreams(ctx context.Context, prefix, startAfter string, limit int) ([]metastore.Stream, string, error) {
	c.calls[ListStreams].Add(1)
	sts, next, err := c.s.ListStreams(ctx, prefix, startAfter, limit)
	c.bill(read(sizes(sts, StreamItemBytes)...))
	return sts, next, err
}

// ListDeleting implements metastore.Store.
func (c *Store) ListDeleting(ctx context.Context, startAfter string, limit int) ([]metastore.Stream, string, error) {
	c.calls[ListDeleting].Add(1)
	sts, next, err := c.s.ListDeleting(ctx, startAfter, limit)
	c.bill(read(sizes(sts, StreamItemBytes)...))
	return sts, next, err
}

// SetStreamConfig implements metastore.Store (counted as SetStreamState:
// a stream metadata write).
func (c *Store) SetStreamConfig(ctx context.Context, name, id string, retentionMs int64, ts metastore.Timestamping) error {
	c.calls[SetStreamState].Add(1)
	return c.s.SetStreamConfig(ctx, name, id, retentionMs, ts)
}

// MoveStream implements metastore.Store (counted as SetStreamState: a
// stream metadata write).
func (c *Store) MoveStream(ctx context.Context, name, id, from, to string) error {
	c.calls[SetStreamState].Add(1)
	c.bill(streamTx(name, id))
	return c.s.MoveStream(ctx, name, id, from, to)
}

// SetStreamState implements metastore.Store.
func (c *Store) SetStreamState(ctx context.Context, name, id string, state metastore.StreamState) error {
	c.calls[SetStreamState].Add(1)
	c.bill(streamTx(name, id))
	return c.s.SetStreamState(ctx, name, id, state)
}

// DeleteStream implements metastore.Store.
func (c *Store) DeleteStream(ctx context.Context, name, id string) error {
	c.calls[DeleteStream].Add(1)
	c.bill(streamTx(name, id))
	return c.s.DeleteStream(ctx, name, id)
}

// PutRefs implements metastore.Store.
func (c *Store) PutRefs(ctx context.Context, chain metastore.ChainID, pass metastore.Cursor, refs []metastore.Ref) error {
	c.calls[PutRefs].Add(1)
	c.bill(PutRefsUnits(refs))
	c.refItems.Add(int64(len(refs)))
	return c.s.PutRefs(ctx, chain, pass, refs)
}

// QueryRefs implements metastore.Store.
func (c *Store) QueryRefs(ctx context.Context, streamID string, fromSeq uint64, limit int) ([]metastore.Ref, error) {
	c.calls[QueryRefs].Add(1)
	refs, err := c.s.QueryRefs(ctx, streamID, fromSeq, limit)
	c.bill(read(sizes(refs, metastore.RefSize)...).add(read())) // the ref before fromSeq, then the rest
	return refs, err
}

// LastRef implements metastore.Store.
func (c *Store) LastRef(ctx context.Context, streamID string) (metastore.Ref, error) {
	c.calls[LastRef].Add(1)
	r, err := c.s.LastRef(ctx, streamID)
	c.bill(read(metastore.RefSize(r)))
	return r, err
}

// RefsBefore implements metastore.Store.
func (c *Store) RefsBefore(ctx context.Context, streamID string, beforeSeq uint64, limit int) ([]metastore.Ref, error) {
	c.calls[RefsBefore].Add(1)
	refs, err := c.s.RefsBefore(ctx, streamID, beforeSeq, limit)
	c.bill(read(sizes(refs, metastore.RefSize)...))
	return refs, err
}

// SwapRefs implements metastore.Store.
func (c *Store) SwapRefs(ctx context.Context, old []metastore.Ref, repl metastore.Ref) error {
	c.calls[SwapRefs].Add(1)
	c.bill(SwapRefsUnits(old, repl))
	return c.s.SwapRefs(ctx, old, repl)
}

// SettleRef implements metastore.Store.
func (c *Store) SettleRef(ctx context.Context, chain metastore.ChainID, settled metastore.Cursor, old []metastore.Ref, repl metastore.Ref) error {
	c.calls[SettleRef].Add(1)
	c.bill(SettleRefUnits(old, repl))
	return c.s.SettleRef(ctx, chain, settled, old, repl)
}

// DeleteRefs implements metastore.Store.
func (c *Store) DeleteRefs(ctx context.Context, refs []metastore.Ref) error {
	c.calls[DeleteRefs].Add(1)
	c.bill(DeleteRefsUnits(refs))
	return c.s.DeleteRefs(ctx, refs)
}

// RaiseFloor implements metastore.Store.
func (c *Store) RaiseFloor(ctx context.Context, name, id string, floor uint64) error {
	c.calls[RaiseFloor].Add(1)
	c.bill(streamTx(name, id))
	return c.s.RaiseFloor(ctx, name, id, floor)
}

// GetHead implements metastore.Store.
func (c *Store) GetHead(ctx context.Context, chain metastore.ChainID) (metastore.Head, error) {
	c.calls[GetHead].Add(1)
	c.bill(read(headItemBytes))
	return c.s.GetHead(ctx, chain)
}

// BeginAbsorb implements metastore.Store.
func (c *Store) BeginAbsorb(ctx context.Context, chain metastore.ChainID, from, to metastore.Cursor) (metastore.Head, error) {
	c.calls[BeginAbsorb].Add(1)
	c.bill(Units{Items: 1, WRU: writeUnits(headItemBytes)}) // a plain UpdateItem
	return c.s.BeginAbsorb(ctx, chain, from, to)
}

// AdvanceCursor implements metastore.Store.
func (c *Store) AdvanceCursor(ctx context.Context, chain metastore.ChainID, kind metastore.CursorKind, from, to metastore.Cursor) error {
	c.calls[AdvanceCursor].Add(1)
	c.bill(tx(headItemBytes))
	return c.s.AdvanceCursor(ctx, chain, kind, from, to)
}

// MoveCursors implements metastore.Store: one head write, as
// AdvanceCursor.
func (c *Store) MoveCursors(ctx context.Context, chain metastore.ChainID, moves []metastore.CursorMove) error {
	c.calls[MoveCursors].Add(1)
	c.bill(tx(headItemBytes))
	return c.s.MoveCursors(ctx, chain, moves)
}

// MintEpoch implements metastore.Store.
func (c *Store) MintEpoch(ctx context.Context, chain metastore.ChainID, prev uint64, e metastore.Epoch) error {
	c.calls[MintEpoch].Add(1)
	c.bill(tx(headItemBytes, metastore.EpochSize(chain, e)))
	return c.s.MintEpoch(ctx, chain, prev, e)
}

// GetEpoch implements metastore.Store.
func (c *Store) GetEpoch(ctx context.Context, chain metastore.ChainID, epoch uint64) (metastore.Epoch, error) {
	c.calls[GetEpoch].Add(1)
	e, err := c.s.GetEpoch(ctx, chain, epoch)
	c.bill(read(metastore.EpochSize(chain, e)))
	return e, err
}

// UpdateEpoch implements metastore.Store.
func (c *Store) UpdateEpoch(ctx context.Context, chain metastore.ChainID, from metastore.EpochState, e metastore.Epoch) error {
	c.calls[UpdateEpoch].Add(1)
	c.bill(tx(metastore.EpochSize(chain, e)))
	return c.s.UpdateEpoch(ctx, chain, from, e)
}

// PutToken implements metastore.Store.
func (c *Store) PutToken(ctx context.Context, t metastore.Token) error {
	c.calls[PutToken].Add(1)
	c.bill(tx(metastore.TokenSize(t), metastore.TokenSize(t)))
	return c.s.PutToken(ctx, t)
}

// GetToken implements metastore.Store.
func (c *Store) GetToken(ctx context.Context, hash string) (metastore.Token, error) {
	c.calls[GetToken].Add(1)
	t, err := c.s.GetToken(ctx, hash)
	c.bill(read(metastore.TokenSize(t)))
	return t, err
}

// DeleteToken implements metastore.Store.
func (c *Store) DeleteToken(ctx context.Context, hash string) error {
	c.calls[DeleteToken].Add(1)
	c.bill(tx(tokenDeleteBytes, tokenDeleteBytes))
	return c.s.DeleteToken(ctx, hash)
}

// ListTokens implements metastore.Store.
func (c *Store) ListTokens(ctx context.Context, prefix string) ([]metastore.Token, error) {
	c.calls[ListTokens].Add(1)
	ts, err := c.s.ListTokens(ctx, prefix)
	c.bill(read(sizes(ts, metastore.TokenSize)...))
	return ts, err
}
