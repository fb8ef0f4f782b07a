// Package lease decides which task of a star leads it: a leadership lease
// on the metastore (metastore.Leases, the LEASE#<star> item) for the warm
// standby on AWS (ADR 0051), where a star's two tasks run on different
// machines and share nothing but the table.
//
// The lease only decides which task tries to lead, so that two tasks of
// one star do not keep deposing each other. What keeps two leaders from
// both committing is still the epoch fence: the task that takes the lease
// runs the ordinary start (fence the last epoch, walk, mint the next), and
// a deposed leader that has not noticed yet finds its flights fenced and
// halts.
//
// Core is the decision logic, with no I/O and no clock (times come in as
// arguments, answers are reported back); Runner is the shell that reads
// and writes the store on a clock.Clock. The rules and their timing are
// in Core's documentation. Invariants, and the tests that check them:
//
//   - At most one contender leads at any moment, whatever the offsets of
//     their clocks, given rates that differ by under Guard/(2 TTL), any
//     pauses, and any latencies (TestSimAtMostOneLeads).
//   - A leader that renews in time is never deposed: without pauses the
//     first leader leads to the end and the standby never takes over
//     (TestSimNoFlapWithoutPauses); with pauses, every takeover follows a
//     pause of the leader (TestSimAtMostOneLeads).
//   - A standby decides on a fresh read only, never on one it read before
//     a pause (TestCoreDecidesOnFreshReadsOnly).
package lease
