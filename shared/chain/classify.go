package chain

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/strandlog/strand/shared/format"
)

// State is what one bucket holds at a slot's key, as seen by a reader that
// knows which epoch and slot the key belongs to.
type State uint8

const (
	// Unknown: not read yet, or the read failed (the bucket was unavailable).
	Unknown State = iota
	// Missing: no object at the key.
	Missing
	// Flight: a flight envelope of this epoch and slot.
	Flight
	// Poison: a poison envelope of this epoch and slot, written by any
	// fencer (the nonce does not matter).
	Poison
	// Junk: an object that is neither: unparseable, or an envelope of another
	// epoch or slot. It counts as a missing copy that cannot be overwritten.
	Junk
)

func (s State) String() string {
	switch s {
	case Unknown:
		return "unknown"
	case Missing:
		return "missing"
	case Flight:
		return "flight"
	case Poison:
		return "poison"
	case Junk:
		return "junk"
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// Verdict is a slot's classification.
type Verdict uint8

const (
	// Undecided: neither committed nor dead (yet).
	Undecided Verdict = iota
	// Committed: at least W buckets hold a flight copy. Permanent.
	Committed
	// Dead: at least K-W+1 buckets hold poison. Permanent.
	Dead
)

func (v Verdict) String() string {
	switch v {
	case Undecided:
		return "undecided"
	case Committed:
		return "committed"
	case Dead:
		return "dead"
	}
	return "verdict(" + strconv.Itoa(int(v)) + ")"
}

// Tally counts the states of a slot's K copies.
type Tally struct {
	Flights, Poisons, Missing, Junk, Unknown int
}

// Count tallies states.
func Count(states []State) Tally {
	var t Tally
	for _, s := range states {
		switch s {
		case Flight:
			t.Flights++
		case Poison:
			t.Poisons++
		case Missing:
			t.Missing++
		case Junk:
			t.Junk++
		default:
			t.Unknown++
		}
	}
	return t
}

// Verdict classifies the tally of a set with K buckets and quorum W:
// Committed at W flights, Dead at K-W+1 poisons, else Undecided. The two
// cannot both hold, since W + (K-W+1) > K.
func (t Tally) Verdict(k, w int) Verdict {
	switch {
	case t.Flights >= w:
		return Committed
	case t.Poisons >= k-w+1:
		return Dead
	}
	return Undecided
}

// CanCommit reports whether the slot could still become committed: the
// flights plus the copies that are missing or unknown reach W.
func (t Tally) CanCommit(w int) bool { return t.Flights+t.Missing+t.Unknown >= w }

// CanDie reports whether the slot could still become dead: the poisons plus
// the copies that are missing or unknown reach K-W+1. Junk and flights
// cannot be overwritten.
func (t Tally) CanDie(k, w int) bool { return t.Poisons+t.Missing+t.Unknown >= k-w+1 }

// Classify is the pure slot classifier: given what each of the K buckets
// holds (len(states) == K), it decides Committed, Dead or Undecided for
// quorum W. Unknown copies count as nothing.
func Classify(w int, states []State) Verdict {
	return Count(states).Verdict(len(states), w)
}

// Copy is one bucket's copy of a slot, as read from its envelope.
type Copy struct {
	State State
	// Env is the parsed envelope, for Flight and Poison (and for Junk that
	// parsed but belongs to another epoch or slot).
	Env format.Envelope
	// Err says why a copy is Junk.
	Err error
}

// For checks c against the slot it was read for: a flight or poison
// envelope of another epoch or slot is Junk.
func (c Copy) For(epoch, slot uint64) Copy {
	if (c.State == Flight || c.State == Poison) && (c.Env.Epoch != epoch || c.Env.Slot != slot) {
		return Copy{State: Junk, Env: c.Env, Err: fmt.Errorf("%s envelope of epoch %d slot %d at the key of epoch %d slot %d", c.Env.Kind, c.Env.Epoch, c.Env.Slot, epoch, slot)}
	}
	return c
}

// copyOf classifies an envelope by kind.
func copyOf(env format.Envelope) Copy {
	switch env.Kind {
	case format.KindFlight:
		return Copy{State: Flight, Env: env}
	case format.KindPoison:
		return Copy{State: Poison, Env: env}
	}
	return Copy{State: Junk, Env: env, Err: fmt.Errorf("envelope kind %s", env.Kind)}
}

// describe renders states as "[flight missing poison]" for errors.
func describe(states []State) string {
	parts := make([]string, len(states))
	for i, s := range states {
		parts[i] = s.String()
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// ParseSlotKey splits chains/<star>/<epoch>/<slot> (format.SlotKey) into
// its parts; ok is false for any other key.
func ParseSlotKey(key string) (star string, epoch, slot uint64, ok bool) {
	rest, found := strings.CutPrefix(key, "chains/")
	if !found {
		return "", 0, 0, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[0] == "" || len(parts[1]) != 20 || len(parts[2]) != 20 {
		return "", 0, 0, false
	}
	e, err1 := strconv.ParseUint(parts[1], 10, 64)
	s, err2 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, 0, false
	}
	return parts[0], e, s, true
}
