package metastoretest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/strandlog/strand/shared/metastore"
)

// leases is s as a metastore.Leases: every Store implements it.
func leases(t *testing.T, s metastore.Store) metastore.Leases {
	t.Helper()
	ls, ok := s.(metastore.Leases)
	if !ok {
		t.Fatalf("%T does not implement metastore.Leases", s)
	}
	return ls
}

func held(star, holder string, v uint64) metastore.Lease {
	return metastore.Lease{Star: star, Holder: holder, Addr: holder + ":4780", Version: v, TTLMs: 3000}
}

func testLease(t *testing.T, s metastore.Store) {
	ls := leases(t, s)
	ctx := context.Background()
	if _, err := ls.GetLease(ctx, "star-1"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("GetLease before any put: %v, want ErrNotFound", err)
	}
	a1 := held("star-1", "task-a", 1)
	if got, err := ls.PutLease(ctx, a1); err != nil || got != a1 {
		t.Fatalf("take v1: %+v, %v; want %+v", got, err, a1)
	}
	// Another taker of v1 loses and learns the holder.
	if got, err := ls.PutLease(ctx, held("star-1", "task-b", 1)); !errors.Is(err, metastore.ErrConflict) || got != a1 {
		t.Fatalf("second take of v1: %+v, %v; want ErrConflict with %+v", got, err, a1)
	}
	// A write that skips a version is refused too.
	if got, err := ls.PutLease(ctx, held("star-1", "task-b", 3)); !errors.Is(err, metastore.ErrConflict) || got != a1 {
		t.Fatalf("put v3 over v1: %+v, %v; want ErrConflict with %+v", got, err, a1)
	}
	a2 := held("star-1", "task-a", 2)
	if _, err := ls.PutLease(ctx, a2); err != nil {
		t.Fatalf("renew to v2: %v", err)
	}
	if got, err := ls.GetLease(ctx, "star-1"); err != nil || got != a2 {
		t.Fatalf("GetLease after renew: %+v, %v; want %+v", got, err, a2)
	}
	rel := metastore.Lease{Star: "star-1", Version: 3, TTLMs: 3000}
	if _, err := ls.PutLease(ctx, rel); err != nil {
		t.Fatalf("release at v3: %v", err)
	}
	if got, err := ls.GetLease(ctx, "star-1"); err != nil || got != rel || !got.Released() {
		t.Fatalf("GetLease after release: %+v, %v; want released %+v", got, err, rel)
	}
	b4 := held("star-1", "task-b", 4)
	if _, err := ls.PutLease(ctx, b4); err != nil {
		t.Fatalf("take a released lease at v4: %v", err)
	}
	// Leases of different stars are independent.
	if _, err := ls.GetLease(ctx, "star-2"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("GetLease of another star: %v, want ErrNotFound", err)
	}
	if _, err := ls.PutLease(ctx, held("star-2", "task-c", 1)); err != nil {
		t.Fatalf("take star-2's lease: %v", err)
	}
	if got, _ := ls.GetLease(ctx, "star-1"); got != b4 {
		t.Fatalf("star-1's lease after star-2's take: %+v, want %+v", got, b4)
	}
	// A canceled context changes nothing.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := ls.PutLease(cctx, held("star-1", "task-c", 5)); err == nil {
		t.Fatal("PutLease with a canceled context succeeded")
	}
	if got, _ := ls.GetLease(ctx, "star-1"); got != b4 {
		t.Fatalf("lease after a canceled put: %+v, want %+v", got, b4)
	}
}

func testLeaseInvalid(t *testing.T, s metastore.Store) {
	ls := leases(t, s)
	ctx := context.Background()
	long := strings.Repeat("h", metastore.MaxLeaseHolderLen+1)
	for name, l := range map[string]metastore.Lease{
		"no star":          {Holder: "a", Addr: "a:1", Version: 1, TTLMs: 1000},
		"star with #":      {Star: "a#b", Holder: "a", Addr: "a:1", Version: 1, TTLMs: 1000},
		"version 0":        {Star: "star-9", Holder: "a", Addr: "a:1", Version: 0, TTLMs: 1000},
		"ttl 0":            {Star: "star-9", Holder: "a", Addr: "a:1", Version: 1, TTLMs: 0},
		"ttl over the max": {Star: "star-9", Holder: "a", Addr: "a:1", Version: 1, TTLMs: metastore.MaxLeaseTTLMs + 1},
		"holder too long":  {Star: "star-9", Holder: long, Addr: "a:1", Version: 1, TTLMs: 1000},
		"addr too long":    {Star: "star-9", Holder: "a", Addr: long, Version: 1, TTLMs: 1000},
		"control in addr":  {Star: "star-9", Holder: "a", Addr: "a\n:1", Version: 1, TTLMs: 1000},
		"holder, no addr":  {Star: "star-9", Holder: "a", Version: 1, TTLMs: 1000},
		"addr, no holder":  {Star: "star-9", Addr: "a:1", Version: 1, TTLMs: 1000},
	} {
		if _, err := ls.PutLease(ctx, l); !errors.Is(err, metastore.ErrInvalid) {
			t.Errorf("%s: PutLease = %v, want ErrInvalid", name, err)
		}
	}
	if l, err := ls.GetLease(ctx, "star-9"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("after invalid puts: %+v, %v; want ErrNotFound (nothing written)", l, err)
	}
}

// testRaceLease: of Racers takers of a free lease exactly one wins, and
// every loser is told who won.
func testRaceLease(t *testing.T, s metastore.Store) {
	ls := leases(t, s)
	ctx := context.Background()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []metastore.Lease
		seen    []metastore.Lease
		other   []error
	)
	for i := range Racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := ls.PutLease(ctx, held("star-race", fmt.Sprintf("task-%d", i), 1))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				winners = append(winners, got)
			case errors.Is(err, metastore.ErrConflict):
				seen = append(seen, got)
			default:
				other = append(other, err)
			}
		}()
	}
	wg.Wait()
	if len(other) > 0 {
		t.Fatalf("unexpected errors: %v", other)
	}
	if len(winners) != 1 {
		t.Fatalf("%d takers of one free lease won, want exactly 1: %+v", len(winners), winners)
	}
	for _, l := range seen {
		if l != winners[0] {
			t.Fatalf("a loser saw %+v, want the winner %+v", l, winners[0])
		}
	}
}
