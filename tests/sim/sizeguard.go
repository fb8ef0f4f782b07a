package sim

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/strandlog/strand/shared/metastore"
)

// DynamoDB's documented limits, written out here rather than taken from
// the metastore package, so the guard checks the stores against an
// independent record: an item is at most 400 KB, a TransactWriteItems at
// most 100 items and 4 MB in all.
const (
	dynamoItemBytes = 400 * 1024
	dynamoTxItems   = 100
	dynamoTxBytes   = 4 * 1024 * 1024
)

// SizeGuard is a metastore.Store wrapper that records every write the
// store refused for its size (metastore.ErrTooLarge) and every write it
// would have sent over one of DynamoDB's limits, measured by itself: a
// simulation that ends with a violation here did something DynamoDB would
// refuse. Reads pass through.
type SizeGuard struct {
	metastore.Store

	mu     sync.Mutex
	writes int
	maxRef int // largest ref item written (bytes, metastore.RefSize)
	maxTx  int // largest PutRefs call (bytes)
	bad    []string
}

var _ metastore.Store = (*SizeGuard)(nil)

// NewSizeGuard wraps s.
func NewSizeGuard(s metastore.Store) *SizeGuard { return &SizeGuard{Store: s} }

// Violations returns what went over a limit, in order.
func (g *SizeGuard) Violations() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.bad...)
}

// Stats returns the writes seen and the largest ref item and PutRefs call.
func (g *SizeGuard) Stats() (writes, maxRef, maxTx int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.writes, g.maxRef, g.maxTx
}

func (g *SizeGuard) note(op string, err error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.writes++
	if errors.Is(err, metastore.ErrTooLarge) {
		g.bad = append(g.bad, fmt.Sprintf("%s refused for its size: %v", op, err))
	}
	return err
}

func (g *SizeGuard) measureRefs(op string, refs []metastore.Ref) {
	g.mu.Lock()
	defer g.mu.Unlock()
	total := 0
	for _, r := range refs {
		n := metastore.RefSize(r)
		total += n
		g.maxRef = max(g.maxRef, n)
		if n > dynamoItemBytes {
			g.bad = append(g.bad, fmt.Sprintf("%s: ref %s@%d is %d bytes, over DynamoDB's item limit", op, r.StreamID, r.FirstSeq, n))
		}
	}
	g.maxTx = max(g.maxTx, total)
	if len(refs) > dynamoTxItems || total > dynamoTxBytes {
		g.bad = append(g.bad, fmt.Sprintf("%s: %d refs, %d bytes in one call, over DynamoDB's transaction limits", op, len(refs), total))
	}
}

func (g *SizeGuard) PutRefs(ctx context.Context, c metastore.ChainID, pass metastore.Cursor, refs []metastore.Ref) error {
	g.measureRefs("PutRefs", refs)
	return g.note("PutRefs", g.Store.PutRefs(ctx, c, pass, refs))
}

func (g *SizeGuard) SwapRefs(ctx context.Context, old []metastore.Ref, repl metastore.Ref) error {
	g.measureRefs("SwapRefs", []metastore.Ref{repl})
	if len(old)+1 > dynamoTxItems {
		g.mu.Lock()
		g.bad = append(g.bad, fmt.Sprintf("SwapRefs: %d refs replaced in one transaction", len(old)))
		g.mu.Unlock()
	}
	return g.note("SwapRefs", g.Store.SwapRefs(ctx, old, repl))
}

func (g *SizeGuard) SettleRef(ctx context.Context, c metastore.ChainID, settled metastore.Cursor, old []metastore.Ref, repl metastore.Ref) error {
	g.measureRefs("SettleRef", []metastore.Ref{repl})
	if len(old)+2 > dynamoTxItems {
		g.mu.Lock()
		g.bad = append(g.bad, fmt.Sprintf("SettleRef: %d refs replaced in one transaction", len(old)))
		g.mu.Unlock()
	}
	return g.note("SettleRef", g.Store.SettleRef(ctx, c, settled, old, repl))
}

func (g *SizeGuard) DeleteRefs(ctx context.Context, refs []metastore.Ref) error {
	if len(refs) > dynamoTxItems {
		g.mu.Lock()
		g.bad = append(g.bad, fmt.Sprintf("DeleteRefs: %d refs in one transaction", len(refs)))
		g.mu.Unlock()
	}
	return g.note("DeleteRefs", g.Store.DeleteRefs(ctx, refs))
}

func (g *SizeGuard) CreateStream(ctx context.Context, s metastore.Stream) (metastore.Stream, error) {
	st, err := g.Store.CreateStream(ctx, s)
	return st, g.note("CreateStream", err)
}

func (g *SizeGuard) SetStreamState(ctx context.Context, name, id string, state metastore.StreamState) error {
	return g.note("SetStreamState", g.Store.SetStreamState(ctx, name, id, state))
}

func (g *SizeGuard) DeleteStream(ctx context.Context, name, id string) error {
	return g.note("DeleteStream", g.Store.DeleteStream(ctx, name, id))
}

func (g *SizeGuard) RaiseFloor(ctx context.Context, name, id string, floor uint64) error {
	return g.note("RaiseFloor", g.Store.RaiseFloor(ctx, name, id, floor))
}

func (g *SizeGuard) BeginAbsorb(ctx context.Context, c metastore.ChainID, from, to metastore.Cursor) (metastore.Head, error) {
	h, err := g.Store.BeginAbsorb(ctx, c, from, to)
	return h, g.note("BeginAbsorb", err)
}

func (g *SizeGuard) AdvanceCursor(ctx context.Context, c metastore.ChainID, kind metastore.CursorKind, from, to metastore.Cursor) error {
	return g.note("AdvanceCursor", g.Store.AdvanceCursor(ctx, c, kind, from, to))
}

func (g *SizeGuard) MoveCursors(ctx context.Context, c metastore.ChainID, moves []metastore.CursorMove) error {
	return g.note("MoveCursors", g.Store.MoveCursors(ctx, c, moves))
}

func (g *SizeGuard) MintEpoch(ctx context.Context, c metastore.ChainID, prev uint64, e metastore.Epoch) error {
	return g.note("MintEpoch", g.Store.MintEpoch(ctx, c, prev, e))
}

func (g *SizeGuard) UpdateEpoch(ctx context.Context, c metastore.ChainID, from metastore.EpochState, e metastore.Epoch) error {
	return g.note("UpdateEpoch", g.Store.UpdateEpoch(ctx, c, from, e))
}
