package chain

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The exhaustive interleaving test: one slot, one writer, one or two
// fencers, every order of their atomic steps.
//
// Actors and their atomic steps (each step is one linearizable object-store
// call on one bucket of the model store):
//
//   - The writer PUTs its flight to each of the K buckets, in parallel: so at
//     any point it may land any of its PUTs not yet done (every bucket-arrival
//     order is covered). A PUT creates the flight if the bucket is empty and
//     counts as the writer's success; otherwise it answers ErrExists and the
//     writer sees a foreign (poison) occupant. The writer claims commit when
//     its successes reach W (it claims even after seeing a foreign occupant,
//     the strongest claim it could make). The writer may also stop at any
//     point (crash): states where it never lands its remaining PUTs are
//     visited like any other.
//   - Each fencer is the real SlotFence core that Set.Fence drives. A round's
//     operations run in parallel in Fence, so in the model a fencer may
//     perform any of its current round's pending operations next (every
//     linearization of a parallel round is covered): a read of a bucket's
//     envelope, or its poison PutIfAbsent. A poison put has three outcomes
//     when the fencer still has ambiguity budget (1 per fencer): plain
//     (created, or ErrExists), ambiguous after the write landed, ambiguous
//     without it; both ambiguous answers are reported as PutOccupied and
//     resolved by the core's read back. When its round is done the fencer
//     plans the next, until it returns a verdict.
//
// The search is a depth-first enumeration of every interleaving, memoized on
// the complete state (store, writer progress and claim, each fencer's core
// state, pending operations, budget and verdict). Memoization does not lose
// coverage: every interleaving is a path through the states visited, and the
// properties below are checked at every state, so they hold on every
// interleaving. It checks at every reachable state:
//
//  1. the slot is never both committed (W flights) and dead (K-W+1 poisons);
//  2. a fencer that has finished returned no error, and its verdict equals
//     the classification of the store now, so it equals what the final
//     occupants imply, and all finished fencers agree. A fencer's cut for the
//     slot is the slot itself when Dead and a later slot when Committed, so
//     equal verdicts are equal cuts;
//  3. a writer that claims commit never coexists with a fencer that found
//     the slot dead, and the store then classifies Committed;
//
// and at every terminal state (no actor can step) that every fencer
// finished: fencing always terminates when buckets answer.
//
// Coverage, exactly:
//
//   - (K,W) = (1,1) and (3,2) with one fencer and with two, and (5,3) with
//     one fencer: fully exhaustive as described (any op of a round next,
//     every writer arrival order, one ambiguous put outcome per fencer).
//   - (5,3) with two fencers: every writer arrival order interleaved at every
//     position with both fencers' steps, but each fencer performs its round's
//     operations in plan order (reads by bucket index, then poisons by bucket
//     index) and its puts answer plainly (no ambiguity). The fully free space
//     is 3.4M states without ambiguity (15 s) and far more with it; the free
//     op order and ambiguity are covered by the smaller cases above.
func TestExhaustiveInterleavings(t *testing.T) {
	for _, c := range []struct {
		k, w, fencers, amb int
		inOrder            bool
		wantMin            int
	}{
		{1, 1, 1, 1, false, 5}, {1, 1, 2, 1, false, 10},
		{3, 2, 1, 1, false, 100}, {3, 2, 2, 1, false, 1000},
		{5, 3, 1, 1, false, 1000}, {5, 3, 2, 0, true, 100000},
	} {
		t.Run(fmt.Sprintf("K%dW%d-fencers%d", c.k, c.w, c.fencers), func(t *testing.T) {
			x := &explorer{t: t, seen: make(map[string]bool), inOrder: c.inOrder}
			x.explore(newModel(t, c.k, c.w, c.fencers, c.amb))
			t.Logf("K=%d W=%d fencers=%d: %d states, %d terminal (committed %d, dead %d)",
				c.k, c.w, c.fencers, len(x.seen), x.terminals, x.committed, x.dead)
			if len(x.seen) < c.wantMin {
				t.Fatalf("explored only %d states, want at least %d: the model is not branching", len(x.seen), c.wantMin)
			}
			if x.committed == 0 || x.dead == 0 {
				t.Fatalf("terminal outcomes committed=%d dead=%d: both must be reachable", x.committed, x.dead)
			}
		})
	}
}

// Store cells.
const (
	cellMissing uint8 = iota
	cellFlight
	cellPoison // + fencer index
)

type fencerModel struct {
	sf      *SlotFence
	pending []Op
	done    bool
	verdict Verdict
	err     error
	amb     int // ambiguous put outcomes left
}

type model struct {
	k, w     int
	store    []uint8
	wPending []bool // writer PUTs not yet landed
	wOK      int
	wForeign bool
	fencers  []fencerModel
	trace    *step // the last step taken, for failure messages
}

type step struct {
	prev   *step
	format string
	args   []any
}

// did records a step; it is formatted only if a check fails.
func (m *model) did(format string, args ...any) {
	m.trace = &step{prev: m.trace, format: format, args: args}
}

func (m *model) steps() []string {
	var out []string
	for s := m.trace; s != nil; s = s.prev {
		out = append(out, fmt.Sprintf(s.format, s.args...))
	}
	slices.Reverse(out)
	return out
}

func newModel(t *testing.T, k, w, nf, amb int) *model {
	m := &model{k: k, w: w, store: make([]uint8, k), wPending: make([]bool, k)}
	for i := range m.wPending {
		m.wPending[i] = true
	}
	for range nf {
		sf, err := NewSlotFence(k, w)
		if err != nil {
			t.Fatal(err)
		}
		f := fencerModel{sf: sf, amb: amb}
		f.replan()
		m.fencers = append(m.fencers, f)
	}
	return m
}

func (f *fencerModel) replan() {
	ops, v, err := f.sf.Plan()
	switch {
	case err != nil:
		f.done, f.err = true, err
	case v != Undecided:
		f.done, f.verdict = true, v
	default:
		f.pending = ops
	}
}

func (m *model) clone() *model {
	c := &model{k: m.k, w: m.w, store: slices.Clone(m.store), wPending: slices.Clone(m.wPending),
		wOK: m.wOK, wForeign: m.wForeign, trace: m.trace}
	for _, f := range m.fencers {
		sf := &SlotFence{k: f.sf.k, w: f.sf.w, states: slices.Clone(f.sf.states), rereads: slices.Clone(f.sf.rereads)}
		c.fencers = append(c.fencers, fencerModel{sf: sf, pending: slices.Clone(f.pending), done: f.done, verdict: f.verdict, err: f.err, amb: f.amb})
	}
	return c
}

// key encodes the complete state. A fencer's pending operations are a set:
// any of them may run next, so their order carries no state.
func (m *model) key() string {
	b := make([]byte, 0, 64)
	b = append(b, m.store...)
	var wp uint16
	for i, p := range m.wPending {
		if p {
			wp |= 1 << i
		}
	}
	flags := byte(m.wOK) << 1
	if m.wForeign {
		flags |= 1
	}
	b = append(b, byte(wp), flags)
	for _, f := range m.fencers {
		for _, s := range f.sf.states {
			b = append(b, byte(s))
		}
		for _, r := range f.sf.rereads {
			b = append(b, byte(r))
		}
		var pend uint16
		for _, op := range f.pending {
			pend |= 1 << (op.Bucket*2 + int(op.Kind) - 1)
		}
		fl := byte(f.amb)<<4 | byte(f.verdict)<<2
		if f.done {
			fl |= 1
		}
		if f.err != nil {
			fl |= 2
		}
		b = append(b, byte(pend), byte(pend>>8), fl)
	}
	return string(b)
}

func (m *model) classify() (Verdict, Tally) {
	states := make([]State, m.k)
	for i, c := range m.store {
		states[i] = cellState(c)
	}
	t := Count(states)
	return t.Verdict(m.k, m.w), t
}

func cellState(c uint8) State {
	switch {
	case c == cellMissing:
		return Missing
	case c == cellFlight:
		return Flight
	}
	return Poison
}

type explorer struct {
	t                          *testing.T
	seen                       map[string]bool
	inOrder                    bool // fencers run each round's ops in plan order
	terminals, committed, dead int
}

func (x *explorer) fail(m *model, format string, args ...any) {
	x.t.Helper()
	x.t.Fatalf("K=%d W=%d: %s\nstore %v, writer ok=%d foreign=%t\ntrace:\n  %s", m.k, m.w, fmt.Sprintf(format, args...),
		m.store, m.wOK, m.wForeign, strings.Join(m.steps(), "\n  "))
}

// check asserts the state properties.
func (x *explorer) check(m *model) {
	x.t.Helper()
	v, t := m.classify()
	if t.Flights >= m.w && t.Poisons >= m.k-m.w+1 {
		x.fail(m, "slot both committed and dead")
	}
	for i, f := range m.fencers {
		if !f.done {
			continue
		}
		if f.err != nil {
			x.fail(m, "fencer %d failed: %v", i, f.err)
		}
		if f.verdict != v {
			x.fail(m, "fencer %d returned %v, store now classifies %v", i, f.verdict, v)
		}
		for j, g := range m.fencers[:i] {
			if g.done && g.verdict != f.verdict {
				x.fail(m, "fencers %d and %d disagree: %v vs %v", j, i, g.verdict, f.verdict)
			}
		}
		if m.wOK >= m.w && f.verdict == Dead {
			x.fail(m, "writer claims commit but fencer %d found the slot dead", i)
		}
	}
	if m.wOK >= m.w && v != Committed {
		x.fail(m, "writer claims commit, store classifies %v", v)
	}
}

func (x *explorer) explore(m *model) {
	k := m.key()
	if x.seen[k] {
		return
	}
	x.seen[k] = true
	x.check(m)
	moved := false
	// Writer: land any pending PUT.
	for i, p := range m.wPending {
		if !p {
			continue
		}
		moved = true
		n := m.clone()
		n.wPending[i] = false
		if n.store[i] == cellMissing {
			n.store[i] = cellFlight
			n.wOK++
			n.did("writer put %d: created", i)
		} else {
			n.wForeign = true
			n.did("writer put %d: exists (foreign)", i)
		}
		x.explore(n)
	}
	// Fencers: perform any pending op of the current round.
	for fi := range m.fencers {
		if m.fencers[fi].done {
			continue
		}
		for oi, op := range m.fencers[fi].pending {
			if x.inOrder && oi > 0 {
				break
			}
			moved = true
			outcomes := []string{"plain"}
			if op.Kind == OpPoison && m.fencers[fi].amb > 0 {
				outcomes = append(outcomes, "ambiguous-landed", "ambiguous-lost")
			}
			for _, o := range outcomes {
				n := m.clone()
				f := &n.fencers[fi]
				f.pending = slices.Delete(f.pending, oi, oi+1)
				i := op.Bucket
				switch op.Kind {
				case OpRead:
					s := cellState(n.store[i])
					f.sf.ObserveRead(i, s)
					n.did("fencer %d read %d: %v", fi, i, s)
				case OpPoison:
					created := false
					if o != "ambiguous-lost" && n.store[i] == cellMissing {
						n.store[i] = cellPoison + uint8(fi)
						created = true
					}
					out := PutOccupied
					if o == "plain" && created {
						out = PutCreated
					}
					if o != "plain" {
						f.amb--
					}
					f.sf.ObservePut(i, out)
					n.did("fencer %d poison %d (%s): created=%t", fi, i, o, created)
				}
				if len(f.pending) == 0 {
					f.replan()
					if f.done {
						n.did("fencer %d decides %v (err %v)", fi, f.verdict, f.err)
					}
				}
				x.explore(n)
			}
		}
	}
	if !moved {
		x.terminals++
		for i, f := range m.fencers {
			if !f.done {
				x.fail(m, "terminal state with fencer %d unfinished", i)
			}
		}
		switch v, _ := m.classify(); v {
		case Committed:
			x.committed++
		case Dead:
			x.dead++
		}
	}
}
