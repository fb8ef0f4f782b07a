package rebalance

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// ErrInvalid refuses a plan's inputs (no stars, a repeated or empty star
// id, a repeated stream name).
var ErrInvalid = errors.New("rebalance: invalid input")

// Stream is one stream as the plan sees it: its name and leader.
type Stream struct {
	Name   string
	Leader string
}

// Move moves stream Name from star From to star To.
type Move struct {
	Name, From, To string
}

// Plan returns the fewest moves after which every star of stars leads
// either floor(n/k) or ceil(n/k) of the n streams (the stars first in
// id order take the extra ones), and no stream is led by a star outside
// stars. A star sheds its streams last in name order first; a stream
// led by an unknown star always moves. Moves are ordered by stream name.
func Plan(streams []Stream, stars []string) ([]Move, error) {
	if len(stars) == 0 {
		return nil, fmt.Errorf("%w: no stars", ErrInvalid)
	}
	ids := slices.Sorted(slices.Values(stars))
	for i, id := range ids {
		if id == "" || i > 0 && ids[i-1] == id {
			return nil, fmt.Errorf("%w: star id %q empty or repeated", ErrInvalid, id)
		}
	}
	sts := slices.SortedFunc(slices.Values(streams), func(a, b Stream) int { return cmp.Compare(a.Name, b.Name) })
	for i := 1; i < len(sts); i++ {
		if sts[i-1].Name == sts[i].Name {
			return nil, fmt.Errorf("%w: stream %q listed twice", ErrInvalid, sts[i].Name)
		}
	}
	n, k := len(sts), len(ids)
	target := map[string]int{}
	for i, id := range ids {
		target[id] = n / k
		if i < n%k {
			target[id]++
		}
	}
	led := map[string][]string{} // star -> its streams, in name order
	var shed []Stream            // streams to move, in the order they are taken
	for _, st := range sts {
		if _, ok := target[st.Leader]; !ok {
			shed = append(shed, st)
			continue
		}
		led[st.Leader] = append(led[st.Leader], st.Name)
	}
	for _, id := range ids {
		names := led[id]
		for i := len(names) - 1; i >= target[id]; i-- {
			shed = append(shed, Stream{Name: names[i], Leader: id})
		}
		led[id] = names[:min(len(names), target[id])]
	}
	var moves []Move
	next := 0 // the first star that may still take streams
	for _, st := range shed {
		for len(led[ids[next]]) >= target[ids[next]] {
			next++
		}
		to := ids[next]
		led[to] = append(led[to], st.Name)
		moves = append(moves, Move{Name: st.Name, From: st.Leader, To: to})
	}
	slices.SortFunc(moves, func(a, b Move) int { return cmp.Compare(a.Name, b.Name) })
	return moves, nil
}
