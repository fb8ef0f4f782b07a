package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/shared/metastore"
)

// MetaFaults is a metastore.Store wrapper that injects the failures a
// DynamoDB table shows: throttling and transaction conflicts that outlast
// the adapter's retries (both ErrUnavailable, nothing written), a table
// that is down (every call ErrUnavailable), slow calls (latency through an
// injectable sleep; inside a testing/synctest bubble time.Sleep is
// virtual), and lost answers (a write lands, the answer is ErrUnavailable).
// Its randomness comes from one seeded source. It counts calls and faults.
type MetaFaults struct {
	s metastore.Store

	mu      sync.Mutex
	rng     *rand.Rand
	down    bool
	errRate float64 // P(ErrUnavailable, nothing written): throttling, tx conflicts
	lost    float64 // P(write lands, answer lost)
	delay   time.Duration
	// short: P(a QueryRefs page of two or more refs is cut short, to a
	// random run of at least one): the metastore contract lets a page end
	// before its limit while more refs follow (DynamoDB's 1 MB page), and
	// every caller must go on to an empty page. Not a fault: Clear keeps it.
	short   float64
	block   func(op string) bool
	unblock chan struct{}

	calls  atomic.Int64
	faults atomic.Int64
}

var _ metastore.Store = (*MetaFaults)(nil)

// NewMetaFaults wraps s; with nothing configured it is transparent.
func NewMetaFaults(s metastore.Store, seed int64) *MetaFaults {
	u := uint64(seed)
	return &MetaFaults{s: s, rng: rand.New(rand.NewPCG(u, u^0x51ed2701))}
}

// SetDown takes the table down (every call fails at once) or back up.
func (m *MetaFaults) SetDown(down bool) { m.mu.Lock(); m.down = down; m.mu.Unlock() }

// Down reports whether the table is down.
func (m *MetaFaults) Down() bool { m.mu.Lock(); defer m.mu.Unlock(); return m.down }

// SetErrorRate fails each call with ErrUnavailable (throttled, or a
// transaction conflict past the adapter's retries) with probability p.
func (m *MetaFaults) SetErrorRate(p float64) { m.mu.Lock(); m.errRate = p; m.mu.Unlock() }

// SetLostAnswers makes each write land and then answer ErrUnavailable with
// probability p.
func (m *MetaFaults) SetLostAnswers(p float64) { m.mu.Lock(); m.lost = p; m.mu.Unlock() }

// SetShortPages cuts each QueryRefs page of two or more refs short with
// probability p (see MetaFaults.short).
func (m *MetaFaults) SetShortPages(p float64) { m.mu.Lock(); m.short = p; m.mu.Unlock() }

// SetDelay makes every call take d first (0: none).
func (m *MetaFaults) SetDelay(d time.Duration) { m.mu.Lock(); m.delay = d; m.mu.Unlock() }

// BlockWhen makes every call for which fn(op) is true wait until its
// context ends (a process killed mid-call) or release is called. fn is
// called under the wrapper's lock and must not call the store.
func (m *MetaFaults) BlockWhen(fn func(op string) bool) (release func()) {
	ch := make(chan struct{})
	m.mu.Lock()
	m.block, m.unblock = fn, ch
	m.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			if m.unblock == ch {
				m.block, m.unblock = nil, nil
			}
			m.mu.Unlock()
			close(ch)
		})
	}
}

// Clear removes every fault.
func (m *MetaFaults) Clear() {
	m.mu.Lock()
	m.down, m.errRate, m.lost, m.delay = false, 0, 0, 0
	m.mu.Unlock()
}

// Calls is the number of calls made; Faults the number of faults injected.
func (m *MetaFaults) Calls() int64  { return m.calls.Load() }
func (m *MetaFaults) Faults() int64 { return m.faults.Load() }

type metaPlan struct {
	fail, lose bool
}

func (m *MetaFaults) before(ctx context.Context, op string, write bool) (metaPlan, error) {
	m.calls.Add(1)
	m.mu.Lock()
	var p metaPlan
	down, delay := m.down, m.delay
	var wait chan struct{}
	if m.block != nil && m.block(op) {
		wait = m.unblock
	}
	if !down {
		if m.errRate > 0 && m.rng.Float64() < m.errRate {
			p.fail = true
		} else if write && m.lost > 0 && m.rng.Float64() < m.lost {
			p.lose = true
		}
	}
	m.mu.Unlock()
	if wait != nil {
		select {
		case <-ctx.Done():
			return p, fmt.Errorf("metastore %s: blocked until the caller died: %w: %w", op, metastore.ErrUnavailable, ctx.Err())
		case <-wait:
		}
	}
	if down {
		m.faults.Add(1)
		return p, fmt.Errorf("metastore %s: injected fault (table down): %w", op, metastore.ErrUnavailable)
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return p, fmt.Errorf("metastore %s: %w: %w", op, metastore.ErrUnavailable, ctx.Err())
		case <-t.C:
		}
	}
	if p.fail {
		m.faults.Add(1)
		return p, fmt.Errorf("metastore %s: injected fault (throttled or transaction conflict): %w", op, metastore.ErrUnavailable)
	}
	return p, nil
}

func (m *MetaFaults) after(op string, p metaPlan, err error) error {
	if p.lose {
		m.faults.Add(1)
		return fmt.Errorf("metastore %s: injected fault (answer lost, call returned %v): %w", op, err, metastore.ErrUnavailable)
	}
	return err
}

func (m *MetaFaults) CreateStream(ctx context.Context, s metastore.Stream) (metastore.Stream, error) {
	p, err := m.before(ctx, "CreateStream", true)
	if err != nil {
		return metastore.Stream{}, err
	}
	got, err := m.s.CreateStream(ctx, s)
	return got, m.after("CreateStream", p, err)
}

func (m *MetaFaults) GetStream(ctx context.Context, name string) (metastore.Stream, error) {
	if _, err := m.before(ctx, "GetStream", false); err != nil {
		return metastore.Stream{}, err
	}
	return m.s.GetStream(ctx, name)
}

func (m *MetaFaults) ListStreams(ctx context.Context, prefix, startAfter string, limit int) ([]metastore.Stream, string, error) {
	if _, err := m.before(ctx, "ListStreams", false); err != nil {
		return nil, "", err
	}
	return m.s.ListStreams(ctx, prefix, startAfter, limit)
}

func (m *MetaFaults) ListDeleting(ctx context.Context, startAfter string, limit int) ([]metastore.Stream, string, error) {
	if _, err := m.before(ctx, "ListDeleting", false); err != nil {
		return nil, "", err
	}
	return m.s.ListDeleting(ctx, startAfter, limit)
}

func (m *MetaFaults) SetStreamState(ctx context.Context, name, id string, state metastore.StreamState) error {
	p, err := m.before(ctx, "SetStreamState", true)
	if err != nil {
		return err
	}
	return m.after("SetStreamState", p, m.s.SetStreamState(ctx, name, id, state))
}

func (m *MetaFaults) DeleteStream(ctx context.Context, name, id string) error {
	p, err := m.before(ctx, "DeleteStream", true)
	if err != nil {
		return err
	}
	return m.after("DeleteStream", p, m.s.DeleteStream(ctx, name, id))
}

func (m *MetaFaults) PutRefs(ctx context.Context, c metastore.ChainID, pass metastore.Cursor, refs []metastore.Ref) error {
	p, err := m.before(ctx, "PutRefs", true)
	if err != nil {
		return err
	}
	return m.after("PutRefs", p, m.s.PutRefs(ctx, c, pass, refs))
}

func (m *MetaFaults) QueryRefs(ctx context.Context, streamID string, fromSeq uint64, limit int) ([]metastore.Ref, error) {
	if _, err := m.before(ctx, "QueryRefs", false); err != nil {
		return nil, err
	}
	return m.shorten(m.s.QueryRefs(ctx, streamID, fromSeq, limit))
}

// shorten cuts a page of refs short at random (m.short), as DynamoDB's
// 1 MB cut may: more refs remain past it.
func (m *MetaFaults) shorten(page []metastore.Ref, err error) ([]metastore.Ref, error) {
	if err == nil && len(page) > 1 {
		m.mu.Lock()
		if m.short > 0 && m.rng.Float64() < m.short {
			page = page[:1+m.rng.IntN(len(page)-1)]
		}
		m.mu.Unlock()
	}
	return page, err
}

func (m *MetaFaults) LastRef(ctx context.Context, streamID string) (metastore.Ref, error) {
	if _, err := m.before(ctx, "LastRef", false); err != nil {
		return metastore.Ref{}, err
	}
	return m.s.LastRef(ctx, streamID)
}

func (m *MetaFaults) RefsBefore(ctx context.Context, streamID string, beforeSeq uint64, limit int) ([]metastore.Ref, error) {
	if _, err := m.before(ctx, "RefsBefore", false); err != nil {
		return nil, err
	}
	return m.shorten(m.s.RefsBefore(ctx, streamID, beforeSeq, limit))
}

func (m *MetaFaults) SwapRefs(ctx context.Context, old []metastore.Ref, repl metastore.Ref) error {
	p, err := m.before(ctx, "SwapRefs", true)
	if err != nil {
		return err
	}
	return m.after("SwapRefs", p, m.s.SwapRefs(ctx, old, repl))
}

func (m *MetaFaults) SettleRef(ctx context.Context, c metastore.ChainID, settled metastore.Cursor, old []metastore.Ref, repl metastore.Ref) error {
	p, err := m.before(ctx, "SettleRef", true)
	if err != nil {
		return err
	}
	return m.after("SettleRef", p, m.s.SettleRef(ctx, c, settled, old, repl))
}

func (m *MetaFaults) DeleteRefs(ctx context.Context, refs []metastore.Ref) error {
	p, err := m.before(ctx, "DeleteRefs", true)
	if err != nil {
		return err
	}
	return m.after("DeleteRefs", p, m.s.DeleteRefs(ctx, refs))
}

func (m *MetaFaults) SetStreamConfig(ctx context.Context, name, id string, retentionMs int64, ts metastore.Timestamping) error {
	p, err := m.before(ctx, "SetStreamConfig", true)
	if err != nil {
		return err
	}
	return m.after("SetStreamConfig", p, m.s.SetStreamConfig(ctx, name, id, retentionMs, ts))
}

func (m *MetaFaults) MoveStream(ctx context.Context, name, id, from, to string) error {
	p, err := m.before(ctx, "MoveStream", true)
	if err != nil {
		return err
	}
	return m.after("MoveStream", p, m.s.MoveStream(ctx, name, id, from, to))
}

func (m *MetaFaults) RaiseFloor(ctx context.Context, name, id string, floor uint64) error {
	p, err := m.before(ctx, "RaiseFloor", true)
	if err != nil {
		return err
	}
	return m.after("RaiseFloor", p, m.s.RaiseFloor(ctx, name, id, floor))
}

func (m *MetaFaults) GetHead(ctx context.Context, c metastore.ChainID) (metastore.Head, error) {
	if _, err := m.before(ctx, "GetHead", false); err != nil {
		return metastore.Head{}, err
	}
	return m.s.GetHead(ctx, c)
}

func (m *MetaFaults) BeginAbsorb(ctx context.Context, c metastore.ChainID, from, to metastore.Cursor) (metastore.Head, error) {
	p, err := m.before(ctx, "BeginAbsorb", true)
	if err != nil {
		return metastore.Head{}, err
	}
	h, err := m.s.BeginAbsorb(ctx, c, from, to)
	return h, m.after("BeginAbsorb", p, err)
}

func (m *MetaFaults) AdvanceCursor(ctx context.Context, c metastore.ChainID, kind metastore.CursorKind, from, to metastore.Cursor) error {
	p, err := m.before(ctx, "AdvanceCursor", true)
	if err != nil {
		return err
	}
	return m.after("AdvanceCursor", p, m.s.AdvanceCursor(ctx, c, kind, from, to))
}

func (m *MetaFaults) MoveCursors(ctx context.Context, c metastore.ChainID, moves []metastore.CursorMove) error {
	p, err := m.before(ctx, "MoveCursors", true)
	if err != nil {
		return err
	}
	return m.after("MoveCursors", p, m.s.MoveCursors(ctx, c, moves))
}

func (m *MetaFaults) MintEpoch(ctx context.Context, c metastore.ChainID, prev uint64, e metastore.Epoch) error {
	p, err := m.before(ctx, "MintEpoch", true)
	if err != nil {
		return err
	}
	return m.after("MintEpoch", p, m.s.MintEpoch(ctx, c, prev, e))
}

func (m *MetaFaults) GetEpoch(ctx context.Context, c metastore.ChainID, epoch uint64) (metastore.Epoch, error) {
	if _, err := m.before(ctx, "GetEpoch", false); err != nil {
		return metastore.Epoch{}, err
	}
	return m.s.GetEpoch(ctx, c, epoch)
}

func (m *MetaFaults) UpdateEpoch(ctx context.Context, c metastore.ChainID, from metastore.EpochState, e metastore.Epoch) error {
	p, err := m.before(ctx, "UpdateEpoch", true)
	if err != nil {
		return err
	}
	return m.after("UpdateEpoch", p, m.s.UpdateEpoch(ctx, c, from, e))
}

func (m *MetaFaults) PutToken(ctx context.Context, t metastore.Token) error {
	p, err := m.before(ctx, "PutToken", true)
	if err != nil {
		return err
	}
	return m.after("PutToken", p, m.s.PutToken(ctx, t))
}

func (m *MetaFaults) GetToken(ctx context.Context, hash string) (metastore.Token, error) {
	if _, err := m.before(ctx, "GetToken", false); err != nil {
		return metastore.Token{}, err
	}
	return m.s.GetToken(ctx, hash)
}

func (m *MetaFaults) DeleteToken(ctx context.Context, hash string) error {
	p, err := m.before(ctx, "DeleteToken", true)
	if err != nil {
		return err
	}
	return m.after("DeleteToken", p, m.s.DeleteToken(ctx, hash))
}

func (m *MetaFaults) ListTokens(ctx context.Context, prefix string) ([]metastore.Token, error) {
	if _, err := m.before(ctx, "ListTokens", false); err != nil {
		return nil, err
	}
	return m.s.ListTokens(ctx, prefix)
}
