package kafka

import (
	"errors"
	"testing"
)

// TestReview3ProducerStatesPerPrincipal (attack, tenants): the sequence
// check of idempotent producers keeps at most maxProducerStates states.
// A hostile principal that sends batches of that many producer ids on
// its own stream must not wipe another principal's state: the victim's
// batch that skips ahead of its next sequence (a lost batch before it)
// is still refused ErrSequence, and the victim's in-order batch still
// goes. The hostile principal's states are the ones given up.
func TestReview3ProducerStatesPerPrincipal(t *testing.T) {
	ps := newProducers()
	batch := func(pid int64, seq int32, n int) Batch {
		return Batch{ProducerID: pid, BaseSequence: seq, Records: make([]Record, n)}
	}
	if err := ps.admit("victim", "a/s", batch(7, 0, 5)); err != nil { // next: 5
		t.Fatal(err)
	}
	for pid := range int64(maxProducerStates + 10) {
		if err := ps.admit("hostile", "b/s", batch(pid, 0, 1)); err != nil {
			t.Fatalf("hostile producer %d: %v", pid, err)
		}
	}
	if n := ps.size(); n > maxProducerStates {
		t.Fatalf("%d producer states kept, over the bound %d", n, maxProducerStates)
	}
	if err := ps.admit("victim", "a/s", batch(7, 9, 1)); !errors.Is(err, ErrSequence) {
		t.Fatalf("the victim's batch at sequence 9 (next 5) after another principal's flood: %v, want ErrSequence", err)
	}
	if err := ps.admit("victim", "a/s", batch(7, 5, 1)); err != nil {
		t.Fatalf("the victim's next batch: %v", err)
	}
	// The hostile principal's own states were given up: its producer 1
	// is taken at any sequence again, as after a restart.
	if err := ps.admit("hostile", "b/s", batch(1, 100, 1)); err != nil {
		t.Fatalf("the hostile principal's producer 1 after its states were dropped: %v", err)
	}
	last := int64(maxProducerStates + 9) // admitted after the drop: kept
	if err := ps.admit("hostile", "b/s", batch(last, 5, 1)); !errors.Is(err, ErrSequence) {
		t.Fatalf("the hostile principal's producer %d (next 1) at sequence 5: %v, want ErrSequence", last, err)
	}
}
