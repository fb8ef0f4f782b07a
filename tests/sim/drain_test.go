package sim

import (
	"context"
	"time"
)

// drainBudget bounds a graceful restart's drain, in the simulation's
// virtual time (node.DefaultDrainBudget in production).
const drainBudget = 5 * time.Second

// gracefulRestart stops the star as a deploy does (node.Close): it
// quiesces it within the drain budget, checks that every batch this
// incarnation admitted is finished (acknowledged, or failed by a halt's
// recovery) when Quiesce reports success, then stops it and starts the
// successor. The invariants checked after every step then hold the
// acknowledged batches to their records, as after a crash.
func (s *sim) gracefulRestart() {
	n := s.node
	if n == nil {
		s.restart(false)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), drainBudget)
	err := n.Star.Quiesce(ctx)
	cancel()
	if err == nil {
		s.mu.Lock()
		for _, b := range s.batches {
			if b.gen != n.Gen || b.p == nil {
				continue
			}
			select {
			case <-b.p.Done():
			default:
				s.mu.Unlock()
				s.fatalf("batch %d.%d admitted by incarnation %d is not finished after Quiesce returned", b.prod, b.idx, n.Gen)
			}
		}
		s.mu.Unlock()
		totals.drains.Add(1)
	}
	s.restart(false)
}
