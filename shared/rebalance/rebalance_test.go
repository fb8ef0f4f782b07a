package rebalance

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestPlanTable(t *testing.T) {
	s := func(name, leader string) Stream { return Stream{Name: name, Leader: leader} }
	for _, c := range []struct {
		name    string
		streams []Stream
		stars   []string
		want    []Move
	}{
		{"balanced already", []Stream{s("a", "x"), s("b", "y")}, []string{"x", "y"}, nil},
		{"a star added", []Stream{s("a", "x"), s("b", "x"), s("c", "x"), s("d", "x")}, []string{"x", "y"},
			[]Move{{"c", "x", "y"}, {"d", "x", "y"}}},
		{"an unknown leader moves", []Stream{s("a", "gone"), s("b", "x")}, []string{"x", "y"}, []Move{{"a", "gone", "y"}}},
		{"odd count: the first star takes the extra", []Stream{s("a", "y"), s("b", "y"), s("c", "y")}, []string{"y", "x"},
			[]Move{{"b", "y", "x"}, {"c", "y", "x"}}},
		{"no streams", nil, []string{"x"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Plan(c.streams, c.stars)
			if err != nil || !slices.Equal(got, c.want) {
				t.Fatalf("Plan: %v %v, want %v", got, err, c.want)
			}
		})
	}
	for _, bad := range [][]string{nil, {"x", "x"}, {""}} {
		if _, err := Plan(nil, bad); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Plan with stars %q: %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := Plan([]Stream{s("a", "x"), s("a", "y")}, []string{"x"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a stream listed twice: %v, want ErrInvalid", err)
	}
}

// TestPlanProperties against a naive model, over random deployments:
// after the moves every star leads floor(n/k) or ceil(n/k) streams and
// none is led by an unknown star; each stream moves at most once, from
// its leader to a star of the list; the count of moves is the model's
// minimum (the streams over each star's target, plus those of unknown
// stars); and the plan does not depend on the order of its inputs.
func TestPlanProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for round := range 500 {
		k := 1 + rng.IntN(6)
		var stars []string
		for i := range k {
			stars = append(stars, fmt.Sprintf("star-%d", i))
		}
		var streams []Stream
		for i := range rng.IntN(60) {
			leader := stars[rng.IntN(max(1, k-rng.IntN(2)))] // often skewed: a star was just added
			if rng.IntN(10) == 0 {
				leader = "star-removed"
			}
			streams = append(streams, Stream{Name: fmt.Sprintf("s%03d", i), Leader: leader})
		}
		moves, err := Plan(streams, stars)
		if err != nil {
			t.Fatal(err)
		}
		leader := map[string]string{}
		count := map[string]int{}
		for _, st := range streams {
			leader[st.Name] = st.Leader
		}
		want := 0 // the model's minimum
		for _, st := range streams {
			count[st.Leader]++
		}
		n := len(streams)
		for i, id := range stars {
			tgt := n / k
			if i < n%k {
				tgt++
			}
			want += max(0, count[id]-tgt)
		}
		want += count["star-removed"]
		if len(moves) != want {
			t.Fatalf("round %d: %d moves, want the minimum %d", round, len(moves), want)
		}
		moved := map[string]bool{}
		for _, m := range moves {
			if moved[m.Name] || leader[m.Name] != m.From || !slices.Contains(stars, m.To) || m.To == m.From {
				t.Fatalf("round %d: bad move %+v", round, m)
			}
			moved[m.Name] = true
			leader[m.Name] = m.To
		}
		after := map[string]int{}
		for _, l := range leader {
			if !slices.Contains(stars, l) {
				t.Fatalf("round %d: a stream still led by %s", round, l)
			}
			after[l]++
		}
		for _, id := range stars {
			if after[id] < n/k || after[id] > (n+k-1)/k {
				t.Fatalf("round %d: %s leads %d of %d streams over %d stars", round, id, after[id], n, k)
			}
		}
		rng.Shuffle(len(streams), func(i, j int) { streams[i], streams[j] = streams[j], streams[i] })
		rng.Shuffle(len(stars), func(i, j int) { stars[i], stars[j] = stars[j], stars[i] })
		again, err := Plan(streams, stars)
		if err != nil || !slices.Equal(again, moves) {
			t.Fatalf("round %d: the plan changed with the order of its inputs", round)
		}
	}
}
