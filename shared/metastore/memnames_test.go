package metastore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/strandlog/strand/shared/metastore"
)

func memStream(name string, i int) metastore.Stream {
	return metastore.Stream{Name: name, ID: fmt.Sprintf("%032x", i+1), Class: metastore.Express, Star: "star-0", State: metastore.StreamActive}
}

// ListStreams on Mem agrees with a naive model (sort every live name, then
// filter) through seeded creates, deletes, re-creates and pages of random
// prefixes, start points and limits.
func TestMemListStreamsMatchesModel(t *testing.T) {
	seed := uint64(17)
	r := rand.New(rand.NewPCG(seed, 1))
	ctx := context.Background()
	m := metastore.NewMem()
	live := map[string]metastore.Stream{}
	name := func() string { return fmt.Sprintf("%c/%d", 'a'+r.IntN(4), r.IntN(3000)) }
	for op := range 20000 {
		switch k := r.IntN(10); {
		case k < 6:
			n := name()
			s := memStream(n, op)
			if _, err := m.CreateStream(ctx, s); err == nil {
				live[n] = s
			} else if _, ok := live[n]; !ok {
				t.Fatalf("seed %d: create %q: %v", seed, n, err)
			}
		case k < 8:
			n := name()
			s, ok := live[n]
			if !ok {
				continue
			}
			if err := m.SetStreamState(ctx, n, s.ID, metastore.StreamDeleting); err != nil {
				t.Fatal(err)
			}
			if err := m.DeleteStream(ctx, n, s.ID); err != nil {
				t.Fatalf("seed %d: delete %q: %v", seed, n, err)
			}
			delete(live, n)
		default:
			prefix := []string{"", "a", "b/", "c/1", "d/29", "e"}[r.IntN(6)]
			after := ""
			if r.IntN(2) == 0 {
				after = name()
			}
			limit := 1 + r.IntN(50)
			var want []string
			for n := range live {
				if strings.HasPrefix(n, prefix) && n > after {
					want = append(want, n)
				}
			}
			slices.Sort(want)
			wantNext := ""
			if len(want) > limit {
				want = want[:limit]
				wantNext = want[limit-1]
			}
			got, next, err := m.ListStreams(ctx, prefix, after, limit)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, s := range got {
				names = append(names, s.Name)
				if s != live[s.Name] {
					t.Fatalf("seed %d: listed %+v, stored %+v", seed, s, live[s.Name])
				}
			}
			if !slices.Equal(names, want) || next != wantNext {
				t.Fatalf("seed %d op %d: list(%q, after %q, %d) = %v next %q, want %v next %q", seed, op, prefix, after, limit, names, next, want, wantNext)
			}
		}
	}
}

// A page of Mem's ListStreams allocates in proportion to the page, not to
// the catalogue: the same page costs the same at 20,000 and 200,000
// streams (it used to collect and sort every name).
func TestMemListStreamsPageIsBounded(t *testing.T) {
	ctx := context.Background()
	alloc := func(n int) uint64 {
		m := metastore.NewMem()
		for i := range n {
			if _, err := m.CreateStream(ctx, memStream(fmt.Sprintf("s/%07d", i), i)); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := m.ListStreams(ctx, "", "", 1); err != nil { // merges the new names in
			t.Fatal(err)
		}
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		page, next, err := m.ListStreams(ctx, "s/", "s/0001000", 1000)
		runtime.ReadMemStats(&b)
		if err != nil || len(page) != 1000 || page[0].Name != "s/0001001" || next != "s/0002000" {
			t.Fatalf("page of %d from s/0001001: next %q, %v", len(page), next, err)
		}
		return b.TotalAlloc - a.TotalAlloc
	}
	small, large := alloc(20000), alloc(200000)
	if large > small+small/2 {
		t.Fatalf("a page of 1000 allocates %d bytes among 200,000 streams, %d among 20,000: it grows with the catalogue", large, small)
	}
}
