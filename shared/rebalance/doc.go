// Package rebalance plans stream moves that spread streams evenly over a
// deployment's stars (ADR 0066), for example after a star is added. The
// plan is a pure function of the stream list and the star list: the same
// inputs, in any order, give the same moves. Executing it is a MoveStream
// per move (strand rebalance; ADR 0065).
package rebalance
