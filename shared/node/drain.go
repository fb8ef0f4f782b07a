package node

import (
	"context"
	"time"
)

// DefaultDrainBudget bounds a graceful Close: enough for a flight in the
// air to commit (the default commit deadline is 10 s on Standard, 2 s on
// Express) and for the final release event, well inside a container's stop
// timeout (ECS: set the task's stopTimeout to the budget plus 10 s).
const DefaultDrainBudget = 15 * time.Second

// Close drains the process and stops it, within the drain budget
// (Config.DrainBudget):
//
//  1. The API stops admitting: Append, AppendSession and ReadSession are
//     answered unavailable with the leader hint (this star's id: its
//     successor takes it over). Unary reads and metadata calls still work.
//  2. The star quiesces (star.Quiesce): batches already pooled and flights
//     in the air commit and their acks are released, and the final release
//     event is published.
//  3. Every open ReadSession and AppendSession ends with unavailable (an
//     append session after the acks of all its admitted batches), so
//     clients reconnect.
//  4. The HTTP servers shut down, the settlement loops stop, the Kafka
//     front end closes, the star closes. Kafka closes last of the
//     listeners: until then it holds the produces the drain refused and
//     answers the rest (metadata, fetches), and when it closes them its
//     clients reconnect, so the later it does, the likelier the
//     successor is serving when they do (ADR 0071).
//
// What is still pending when the budget runs out (a commit that outlasts
// it) fails as unavailable, as an abrupt stop would; nothing acknowledged
// is affected either way.
func (n *Node) Close() {
	budget := n.budget
	if budget <= 0 {
		budget = DefaultDrainBudget
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	if n.srv != nil {
		n.srv.BeginDrain()
	}
	if n.Star != nil && n.srv != nil {
		if err := n.Star.Quiesce(ctx); err != nil {
			n.log.Warn("drain: not everything admitted was acknowledged within the budget; the rest fails as unavailable", "budget", budget.String(), "err", err.Error())
		}
	}
	if n.srv != nil {
		n.srv.EndSessions()
	}
	if n.api != nil {
		_ = n.api.Shutdown(ctx)
	}
	if n.admin != nil {
		_ = n.admin.Shutdown(ctx)
	}
	n.cancel()
	n.wg.Wait()
	if n.kafka != nil {
		_ = n.kafka.Close()
	}
	if n.Star != nil {
		n.Star.Close()
	}
	n.log.Info("drained and stopped", "took", time.Since(start).String(), "budget", budget.String())
}
