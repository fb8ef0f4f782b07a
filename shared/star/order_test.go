package star

import (
	"math/rand/v2"
	"testing"
)

// TestOrderAgainstModel drives the release core with random claim and
// completion orders and compares it with a naive model: a slot releases when
// it and all earlier slots are durable, in slot order, exactly once.
func TestOrderAgainstModel(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		r := rand.New(rand.NewPCG(seed, 99))
		capacity := 1 + r.IntN(8)
		first := uint64(r.IntN(5))
		o := newOrder(first, capacity)
		durable := map[uint64]bool{}
		var claimed, released []uint64
		var outstanding []uint64
		for step := 0; step < 400; step++ {
			if !o.full() && (len(outstanding) == 0 || r.IntN(2) == 0) {
				s := o.claim()
				if len(claimed) > 0 && s != claimed[len(claimed)-1]+1 {
					t.Fatalf("seed %d: claimed %d after %d", seed, s, claimed[len(claimed)-1])
				}
				claimed = append(claimed, s)
				outstanding = append(outstanding, s)
				continue
			}
			if len(outstanding) == 0 {
				continue
			}
			i := r.IntN(len(outstanding))
			s := outstanding[i]
			outstanding = append(outstanding[:i], outstanding[i+1:]...)
			durable[s] = true
			from, to := o.markDurable(s)
			// model: next expected release is first + len(released)
			var want []uint64
			for n := first + uint64(len(released)); durable[n]; n++ {
				want = append(want, n)
				delete(durable, n)
			}
			if from != first+uint64(len(released)) || int(to-from) != len(want) {
				t.Fatalf("seed %d: released [%d,%d), model %v", seed, from, to, want)
			}
			for n := from; n < to; n++ {
				released = append(released, n)
			}
			if o.pending() > capacity {
				t.Fatalf("seed %d: %d pending over capacity %d", seed, o.pending(), capacity)
			}
		}
		for i, s := range released {
			if s != first+uint64(i) {
				t.Fatalf("seed %d: release %d is slot %d", seed, i, s)
			}
		}
	}
}

func TestOrderPanicsWhenFull(t *testing.T) {
	o := newOrder(0, 1)
	o.claim()
	defer func() {
		if recover() == nil {
			t.Fatal("claim on a full window did not panic")
		}
	}()
	o.claim()
}
