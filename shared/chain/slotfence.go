package chain

import (
	"fmt"
	"slices"
)

// OpKind is an operation a SlotFence asks its driver to perform.
type OpKind uint8

const (
	// OpRead: one bounded GET of the envelope in a bucket.
	OpRead OpKind = iota + 1
	// OpPoison: PutIfAbsent of the fencer's poison in a bucket.
	OpPoison
)

func (k OpKind) String() string {
	switch k {
	case OpRead:
		return "read"
	case OpPoison:
		return "poison"
	}
	return fmt.Sprintf("op(%d)", uint8(k))
}

// Op is one operation on one bucket.
type Op struct {
	Kind   OpKind
	Bucket int
}

// PutOutcome is what a poison PutIfAbsent answered.
type PutOutcome uint8

const (
	// PutCreated: the put returned nil; the bucket holds our poison.
	PutCreated PutOutcome = iota + 1
	// PutOccupied: ErrExists or ErrAmbiguous. Something (perhaps our own
	// poison) may be there; the fencer reads the envelope back.
	PutOccupied
	// PutFailed: ErrUnavailable or another failure; nothing was written.
	PutFailed
)

// DefaultJunkRereads is how many times a SlotFence rereads a junk copy that
// blocks its verdict before it gives up: a corrupt read in transit heals on
// a reread, junk at rest does not.
const DefaultJunkRereads = 2

// SlotFence is the pure decision core of fencing one slot: a state machine
// that does no I/O and reads no clock. Its driver loops: Plan returns the
// operations of the next round (reads of the copies it does not know, and
// poisons for copies it knows are missing); the driver performs them, in any
// order or in parallel, and reports each with ObserveRead or ObservePut;
// then it plans again, until Plan returns a verdict or an error.
//
// Knowledge only grows where it is permanent: a flight or poison once seen
// stays. A poison put that created the object counts at once; an occupied
// or ambiguous put is read back; a failed put leaves the copy missing and is
// retried next round. Plan poisons only as many missing copies as the slot
// still needs to die (K-W+1 poisons), never a bucket whose copy it has not
// read, and it returns ErrStuck without writing when no poisoning could kill
// the slot (junk or flights fill too many buckets) after rereading the junk.
type SlotFence struct {
	k, w    int
	states  []State
	rereads []int // junk rereads left per bucket
}

// NewSlotFence returns the core for a set of k buckets with quorum w.
func NewSlotFence(k, w int) (*SlotFence, error) {
	if k < 1 || w < 1 || w > k {
		return nil, fmt.Errorf("%w: K=%d W=%d (want 1 <= W <= K)", ErrInvalid, k, w)
	}
	f := &SlotFence{k: k, w: w, states: make([]State, k), rereads: make([]int, k)}
	for i := range f.rereads {
		f.rereads[i] = DefaultJunkRereads
	}
	return f, nil
}

// States returns a copy of what the fencer knows of each bucket.
func (f *SlotFence) States() []State { return slices.Clone(f.states) }

// Plan returns the next round's operations, or the verdict once the slot is
// Committed or Dead (with no operations). It returns an error matching
// ErrStuck when the slot can never be decided by poisoning.
func (f *SlotFence) Plan() ([]Op, Verdict, error) {
	t := Count(f.states)
	if v := t.Verdict(f.k, f.w); v != Undecided {
		return nil, v, nil
	}
	var ops []Op
	if !t.CanDie(f.k, f.w) {
		for i, s := range f.states {
			if s == Junk && f.rereads[i] > 0 {
				f.rereads[i]--
				ops = append(ops, Op{OpRead, i})
			}
		}
		if len(ops) > 0 {
			return ops, Undecided, nil
		}
		return nil, Undecided, fmt.Errorf("%w: copies %s, K=%d W=%d: fewer than K-W+1 buckets can hold poison", ErrStuck, describe(f.states), f.k, f.w)
	}
	need := f.k - f.w + 1 - t.Poisons
	for i, s := range f.states {
		if s == Missing && need > 0 {
			ops = append(ops, Op{OpPoison, i})
			need--
		}
	}
	for i, s := range f.states {
		if s == Unknown {
			ops = append(ops, Op{OpRead, i})
		}
	}
	return ops, Undecided, nil
}

// ObserveRead reports a read of bucket i: the copy's state, or Unknown if
// the read failed.
func (f *SlotFence) ObserveRead(i int, s State) {
	if f.states[i] == Flight || f.states[i] == Poison {
		return // permanent; a reread cannot revoke it
	}
	f.states[i] = s
}

// ObservePut reports a poison put to bucket i.
func (f *SlotFence) ObservePut(i int, o PutOutcome) {
	switch o {
	case PutCreated:
		f.states[i] = Poison
	case PutOccupied:
		f.states[i] = Unknown
	case PutFailed:
		// Nothing written: the copy is still missing as far as we know; the
		// next round retries the put, which resolves either way.
	default:
		panic(fmt.Sprintf("chain: unknown put outcome %d", o))
	}
}
