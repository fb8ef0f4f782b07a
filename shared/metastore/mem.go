package metastore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Mem is an in-memory Store: the reference implementation the conformance
// suite runs first. One mutex serialises every call, so each method is
// atomic; values are deep-copied on the way in and out, so callers never
// share memory with the store. Its zero value is not usable: call NewMem.
type Mem struct {
	mu      sync.Mutex
	streams map[string]Stream            // by name
	retired map[string]Stream            // deleting streams, by id
	names   nameIndex                    // the streams' names, in order (ListStreams)
	refs    map[string]map[uint64]Ref    // by stream id, then first seq
	heads   map[ChainID]Head             // by chain
	epochs  map[ChainID]map[uint64]Epoch // by chain, then epoch
	tokens  map[string]Token             // by hash
	leases  map[string]Lease             // by star (lease.go)
}

var _ Store = (*Mem)(nil)

// NewMem returns an empty in-memory store.
func NewMem() *Mem {
	return &Mem{
		streams: make(map[string]Stream),
		retired: make(map[string]Stream),
		refs:    make(map[string]map[uint64]Ref),
		heads:   make(map[ChainID]Head),
		epochs:  make(map[ChainID]map[uint64]Epoch),
		tokens:  make(map[string]Token),
	}
}

func ctxErr(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("metastore: %s: %w", op, err)
	}
	return nil
}

// CreateStream implements Store.
func (m *Mem) CreateStream(ctx context.Context, s Stream) (Stream, error) {
	if err := ctxErr(ctx, "create stream"); err != nil {
		return Stream{}, err
	}
	if err := ValidateStream(s); err != nil {
		return Stream{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.streams[s.Name]; ok {
		return cur, fmt.Errorf("create stream %q: %w", s.Name, ErrExists)
	}
	m.streams[s.Name] = s
	m.names.add(s.Name)
	return s, nil
}

// GetStream implements Store.
func (m *Mem) GetStream(ctx context.Context, name string) (Stream, error) {
	if err := ctxErr(ctx, "get stream"); err != nil {
		return Stream{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.streams[name]
	if !ok {
		return Stream{}, fmt.Errorf("stream %q: %w", name, ErrNotFound)
	}
	return s, nil
}

// ListStreams implements Store.
func (m *Mem) ListStreams(ctx context.Context, prefix, startAfter string, limit int) ([]Stream, string, error) {
	if err := ctxErr(ctx, "list streams"); err != nil {
		return nil, "", err
	}
	if err := ValidateLimit(limit); err != nil {
		return nil, "", err
	}
	m.mu.Lock()
	names := m.names.page(prefix, startAfter, limit+1, func(n string) bool { _, ok := m.streams[n]; return ok })
	next := ""
	if len(names) > limit {
		names = names[:limit]
		next = names[limit-1]
	}
	out := make([]Stream, len(names))
	for i, name := range names {
		out[i] = m.streams[name]
	}
	m.mu.Unlock()
	return out, next, nil
}

// SetStreamState implements Store.
func (m *Mem) SetStreamState(ctx context.Context, name, id string, state StreamState) error {
	if err := ctxErr(ctx, "set stream state"); err != nil {
		return err
	}
	if err := ValidateStreamState(state); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.streams[name]
	_, retired := m.retired[id]
	switch {
	case retired && state == StreamDeleting:
		return nil // again
	case retired:
		return fmt.Errorf("set state of stream %q: deleting is final: %w", name, ErrConflict)
	case !ok:
		return fmt.Errorf("set state of stream %q: %w", name, ErrNotFound)
	case s.ID != id:
		return fmt.Errorf("set state of stream %q: id is %s, not %s: %w", name, s.ID, id, ErrConflict)
	case s.State == StreamDeleting && state != StreamDeleting:
		return fmt.Errorf("set state of stream %q: deleting is final: %w", name, ErrConflict)
	}
	s.State = state
	if state == StreamDeleting {
		delete(m.streams, name)
		m.names.remove()
		m.retired[id] = s
		return nil
	}
	m.streams[name] = s
	return nil
}

// ListDeleting implements Store. It sorts the deleting streams' ids (a
// few: trim removes them).
func (m *Mem) ListDeleting(ctx context.Context, startAfter string, limit int) ([]Stream, string, error) {
	if err := ctxErr(ctx, "list deleting streams"); err != nil {
		return nil, "", err
	}
	if err := ValidateLimit(limit); err != nil {
		return nil, "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var ids []string
	for id := range m.retired {
		if id > startAfter {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	next := ""
	if len(ids) > limit {
		ids = ids[:limit]
		next = ids[limit-1]
	}
	out := make([]Stream, len(ids))
	for i, id := range ids {
		out[i] = m.retired[id]
	}
	return out, next, nil
}

// DeleteStream implements Store.
func (m *Mem) DeleteStream(ctx context.Context, name, id string) error {
	if err := ctxErr(ctx, "delete stream"); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.retired, id)
	if s, ok := m.streams[name]; ok && s.ID == id {
		delete(m.streams, name)
		m.names.remove()
	}
	return nil
}

// PutRefs implements Store. The whole batch lands atomically, under the
// lease check.
func (m *Mem) PutRefs(ctx context.Context, chain ChainID, pass Cursor, refs []Ref) error {
	if err := ctxErr(ctx, "put refs"); err != nil {
		return err
	}
	if err := ValidateChain(chain); err != nil {
		return err
	}
	if err := ValidatePass(pass); err != nil {
		return err
	}
	if err := ValidatePutRefs(refs); err != nil {
		return err
	}
	if len(refs) == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.heads[chain]
	if !ok {
		return fmt.Errorf("put refs of chain %s: no head: %w", chain, ErrConflict)
	}
	if err := PassCurrent(h, pass); err != nil {
		return fmt.Errorf("chain %s: %w", chain, err)
	}
	for _, r := range refs {
		m.putRef(r)
	}
	return nil
}

func (m *Mem) putRef(r Ref) {
	byseq := m.refs[r.StreamID]
	if byseq == nil {
		byseq = make(map[uint64]Ref)
		m.refs[r.StreamID] = byseq
	}
	byseq[r.FirstSeq] = cloneRef(r)
}

// QueryRefs implements Store.
func (m *Mem) QueryRefs(ctx context.Context, streamID string, fromSeq uint64, limit int) ([]Ref, error) {
	return m.query(ctx, "query refs", streamID, limit, func(r Ref) bool { return r.LastSeq >= fromSeq }, func(refs []Ref) []Ref {
		// As DynamoDB: the ref that starts before fromSeq is one Query,
		// the refs from fromSeq on another, cut at limit and at
		// MaxQueryBytes.
		var prev, fwd []Ref
		for _, r := range refs {
			if r.FirstSeq < fromSeq {
				prev = append(prev, r)
			} else {
				fwd = append(fwd, r)
			}
		}
		out := append(prev, QueryPage(fwd, limit-len(prev))...)
		return out[:min(len(out), limit)]
	})
}

// query is a read of streamID's refs: the ones keep takes, in seq order,
// cut to a page by page, cloned. It checks ctx and limit first.
func (m *Mem) query(ctx context.Context, op, streamID string, limit int, keep func(Ref) bool, page func([]Ref) []Ref) ([]Ref, error) {
	if err := ctxErr(ctx, op); err != nil {
		return nil, err
	}
	if err := ValidateLimit(limit); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var refs []Ref
	for _, r := range m.refs[streamID] {
		if keep(r) {
			refs = append(refs, r)
		}
	}
	slices.SortFunc(refs, func(a, b Ref) int { return cmp.Compare(a.FirstSeq, b.FirstSeq) })
	out := page(refs)
	for i := range out {
		out[i] = cloneRef(out[i])
	}
	return out, nil
}

// LastRef implements Store.
func (m *Mem) LastRef(ctx context.Context, streamID string) (Ref, error) {
	if err := ctxErr(ctx, "last ref"); err != nil {
		return Ref{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var (
		last  Ref
		found bool
	)
	for seq, r := range m.refs[streamID] {
		if !found || seq > last.FirstSeq {
			last, found = r, true
		}
	}
	if !found {
		return Ref{}, fmt.Errorf("last ref of stream %s: %w", streamID, ErrNotFound)
	}
	return cloneRef(last), nil
}

// RefsBefore implements Store.
func (m *Mem) RefsBefore(ctx context.Context, streamID string, beforeSeq uint64, limit int) ([]Ref, error) {
	return m.query(ctx, "refs before", streamID, limit, func(r Ref) bool { return r.FirstSeq < beforeSeq }, func(refs []Ref) []Ref {
		slices.Reverse(refs)
		return QueryPage(refs, limit) // as DynamoDB: 1 MB a page
	})
}

// SwapRefs implements Store.
func (m *Mem) SwapRefs(ctx context.Context, old []Ref, repl Ref) error {
	if err := ctxErr(ctx, "swap refs"); err != nil {
		return err
	}
	if err := ValidateSwap(old, repl); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	byseq := m.refs[repl.StreamID]
	for _, o := range old {
		cur, ok := byseq[o.FirstSeq]
		if !ok || !EqualRef(cur, o) {
			return fmt.Errorf("swap refs of stream %s: ref at %d changed or gone: %w", o.StreamID, o.FirstSeq, ErrConflict)
		}
	}
	for _, o := range old[1:] {
		delete(byseq, o.FirstSeq)
	}
	m.putRef(repl)
	return nil
}

// SettleRef implements Store.
func (m *Mem) SettleRef(ctx context.Context, chain ChainID, settled Cursor, old []Ref, repl Ref) error {
	if err := ctxErr(ctx, "settle ref"); err != nil {
		return err
	}
	if err := ValidateChain(chain); err != nil {
		return err
	}
	if err := ValidateSettleRef(old, repl); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.heads[chain]
	if !ok {
		return fmt.Errorf("settle ref of chain %s: no head: %w", chain, ErrConflict)
	}
	if err := SettleCurrent(h, settled); err != nil {
		return fmt.Errorf("chain %s: %w", chain, err)
	}
	byseq := m.refs[repl.StreamID]
	err := SettleOn(old, repl, func(i int) (Ref, bool) {
		if i < 0 {
			r, ok := byseq[repl.FirstSeq]
			return r, ok
		}
		r, ok := byseq[old[i].FirstSeq]
		return r, ok
	})
	if err != nil {
		return err
	}
	var before, next Ref
	var hasBefore, hasNext bool
	reach := SettleReach(old, repl)
	for seq, r := range byseq {
		if seq < repl.FirstSeq && (!hasBefore || seq > before.FirstSeq) {
			before, hasBefore = r, true
		}
		if seq > reach && (!hasNext || seq < next.FirstSeq) {
			next, hasNext = r, true
		}
	}
	if err := SettleApart(repl, before, hasBefore, next, hasNext); err != nil {
		return err
	}
	for _, o := range old {
		delete(byseq, o.FirstSeq)
	}
	m.putRef(repl)
	return nil
}

// DeleteRefs implements Store. The whole batch lands atomically: one ref
// that changed since it was read fails it, and nothing is deleted.
func (m *Mem) DeleteRefs(ctx context.Context, refs []Ref) error {
	if err := ctxErr(ctx, "delete refs"); err != nil {
		return err
	}
	if err := ValidateDeleteRefs(refs); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range refs {
		cur, ok := m.refs[r.StreamID][r.FirstSeq]
		if err := DeleteOn(cur, ok, r); err != nil {
			return err
		}
	}
	for _, r := range refs {
		byseq := m.refs[r.StreamID]
		delete(byseq, r.FirstSeq)
		if byseq != nil && len(byseq) == 0 {
			delete(m.refs, r.StreamID)
		}
	}
	return nil
}

// RaiseFloor implements Store.
func (m *Mem) RaiseFloor(ctx context.Context, name, id string, floor uint64) error {
	if err := ctxErr(ctx, "raise floor"); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.streams[name]
	s, changed, err := RaiseFloorOn(s, ok, name, id, floor)
	if changed {
		m.streams[name] = s
	}
	return err
}

// SetStreamConfig implements Store.
func (m *Mem) SetStreamConfig(ctx context.Context, name, id string, retentionMs int64, ts Timestamping) error {
	if err := ctxErr(ctx, "set stream config"); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.streams[name]
	s, err := SetConfigOn(s, ok, name, id, retentionMs, ts)
	if err == nil {
		m.streams[name] = s
	}
	return err
}

// MoveStream implements Store.
func (m *Mem) MoveStream(ctx context.Context, name, id, from, to string) error {
	if err := ctxErr(ctx, "move stream"); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.streams[name]
	s, changed, err := MoveStreamOn(s, ok, name, id, from, to)
	if changed {
		m.streams[name] = s
	}
	return err
}

// GetHead implements Store.
func (m *Mem) GetHead(ctx context.Context, chain ChainID) (Head, error) {
	if err := ctxErr(ctx, "get head"); err != nil {
		return Head{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.heads[chain]
	if !ok {
		return Head{}, fmt.Errorf("head of chain %s: %w", chain, ErrNotFound)
	}
	return h, nil
}

// AdvanceCursor implements Store.
func (m *Mem) AdvanceCursor(ctx context.Context, chain ChainID, kind CursorKind, from, to Cursor) error {
	if err := ctxErr(ctx, "advance cursor"); err != nil {
		return err
	}
	if err := ValidateAdvance(kind, from, to); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.heads[chain]
	if !ok {
		return fmt.Errorf("advance %s cursor of chain %s: %w", kind, chain, ErrNotFound)
	}
	h, err := AdvanceOn(h, kind, from, to)
	if err != nil {
		return fmt.Errorf("chain %s: %w", chain, err)
	}
	m.heads[chain] = h
	return nil
}

// MoveCursors implements Store.
func (m *Mem) MoveCursors(ctx context.Context, chain ChainID, moves []CursorMove) error {
	if err := ctxErr(ctx, "move cursors"); err != nil {
		return err
	}
	if err := ValidateMoves(moves); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.heads[chain]
	if !ok {
		return fmt.Errorf("move cursors of chain %s: %w", chain, ErrNotFound)
	}
	h, err := MoveCursorsOn(h, moves)
	if err != nil {
		return fmt.Errorf("chain %s: %w", chain, err)
	}
	m.heads[chain] = h
	return nil
}

// BeginAbsorb implements Store.
func (m *Mem) BeginAbsorb(ctx context.Context, chain ChainID, from, to Cursor) (Head, error) {
	if err := ctxErr(ctx, "begin absorb"); err != nil {
		return Head{}, err
	}
	if err := ValidateBeginAbsorb(from, to); err != nil {
		return Head{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.heads[chain]
	if !ok {
		return Head{}, fmt.Errorf("begin absorb on chain %s: %w", chain, ErrNotFound)
	}
	h, err := BeginAbsorbOn(h, from, to)
	if err != nil {
		return h, fmt.Errorf("chain %s: %w", chain, err)
	}
	m.heads[chain] = h
	return h, nil
}

// MintEpoch implements Store.
func (m *Mem) MintEpoch(ctx context.Context, chain ChainID, prev uint64, e Epoch) error {
	if err := ctxErr(ctx, "mint epoch"); err != nil {
		return err
	}
	if err := ValidateChain(chain); err != nil {
		return err
	}
	if err := ValidateMint(prev, e); err != nil {
		return err
	}
	if err := CheckEpochSize(chain, e); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.heads[chain]
	var cur uint64
	if ok {
		cur = h.Epoch
	}
	if cur != prev {
		return fmt.Errorf("mint epoch %d of chain %s after %d: head is at %d: %w", e.Epoch, chain, prev, cur, ErrConflict)
	}
	byepoch := m.epochs[chain]
	if byepoch == nil {
		byepoch = make(map[uint64]Epoch)
		m.epochs[chain] = byepoch
	}
	if _, exists := byepoch[e.Epoch]; exists {
		return fmt.Errorf("mint epoch %d of chain %s: epoch exists: %w", e.Epoch, chain, ErrConflict)
	}
	byepoch[e.Epoch] = cloneEpoch(e)
	if ok {
		h.Epoch = e.Epoch
	} else {
		h = NewHead(e.Epoch)
	}
	m.heads[chain] = h
	return nil
}

// GetEpoch implements Store.
func (m *Mem) GetEpoch(ctx context.Context, chain ChainID, epoch uint64) (Epoch, error) {
	if err := ctxErr(ctx, "get epoch"); err != nil {
		return Epoch{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.epochs[chain][epoch]
	if !ok {
		return Epoch{}, fmt.Errorf("epoch %d of chain %s: %w", epoch, chain, ErrNotFound)
	}
	return cloneEpoch(e), nil
}

// UpdateEpoch implements Store.
func (m *Mem) UpdateEpoch(ctx context.Context, chain ChainID, from EpochState, e Epoch) error {
	if err := ctxErr(ctx, "update epoch"); err != nil {
		return err
	}
	if err := ValidateEpochUpdate(from, e); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.epochs[chain][e.Epoch]
	if !ok {
		return fmt.Errorf("update epoch %d of chain %s: %w", e.Epoch, chain, ErrNotFound)
	}
	if cur.State != from {
		return fmt.Errorf("update epoch %d of chain %s from state %d: it is in state %d: %w", e.Epoch, chain, from, cur.State, ErrConflict)
	}
	cur.State, cur.Cut = e.State, e.Cut
	m.epochs[chain][e.Epoch] = cur
	return nil
}

// PutToken implements Store.
func (m *Mem) PutToken(ctx context.Context, t Token) error {
	if err := ctxErr(ctx, "put token"); err != nil {
		return err
	}
	if err := ValidateToken(t); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tokens[t.Hash] = cloneToken(t)
	return nil
}

// GetToken implements Store.
func (m *Mem) GetToken(ctx context.Context, hash string) (Token, error) {
	if err := ctxErr(ctx, "get token"); err != nil {
		return Token{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tokens[hash]
	if !ok {
		return Token{}, fmt.Errorf("token %.8s...: %w", hash, ErrNotFound)
	}
	return cloneToken(t), nil
}

// DeleteToken implements Store.
func (m *Mem) DeleteToken(ctx context.Context, hash string) error {
	if err := ctxErr(ctx, "delete token"); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.tokens, hash)
	return nil
}

// ListTokens implements Store.
func (m *Mem) ListTokens(ctx context.Context, prefix string) ([]Token, error) {
	if err := ctxErr(ctx, "list tokens"); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Token
	for _, t := range m.tokens {
		if strings.HasPrefix(t.Prefix, prefix) {
			out = append(out, cloneToken(t))
		}
	}
	slices.SortFunc(out, func(a, b Token) int { return strings.Compare(a.Hash, b.Hash) })
	return out, nil
}

func cloneRef(r Ref) Ref {
	r.Locations = slices.Clone(r.Locations)
	r.Producers = slices.Clone(r.Producers)
	r.Carried = slices.Clone(r.Carried)
	if r.Commands != nil {
		c := *r.Commands
		r.Commands = &c
	}
	return r
}

func cloneEpoch(e Epoch) Epoch {
	e.Buckets = slices.Clone(e.Buckets)
	return e
}

func cloneToken(t Token) Token {
	t.Ops = slices.Clone(t.Ops)
	return t
}
