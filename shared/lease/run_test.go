package lease

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strandlog/strand/shared/metastore"
)

func runner(t *testing.T, store metastore.Leases, holder string) *Runner {
	t.Helper()
	r, err := NewRunner(Config{Star: "star-1", Holder: holder, Addr: holder + ":4780", TTL: time.Second}, store, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRunnerCrashAndHandover: a first runner leads; a second waits. The
// first crashes (its context ends: the lease is left to lapse) and the
// second leads within TTL plus a poll; a third waits, and when the second
// releases (the SIGTERM handover) it leads within a poll, not a TTL.
func TestRunnerCrashAndHandover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := metastore.NewMem()
		a, b, c := runner(t, store, "a"), runner(t, store, "b"), runner(t, store, "c")
		actx, crash := context.WithCancel(t.Context())
		aerr := make(chan error, 1)
		go func() { aerr <- a.Run(actx) }()
		<-a.Led()
		berr := make(chan error, 1)
		go func() { berr <- b.Run(t.Context()) }()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if !a.Leading() || b.Leading() {
			t.Fatalf("after 5 s: a leading %v, b leading %v; want only a", a.Leading(), b.Leading())
		}
		if h := b.Holder(); h.Holder != "a" || h.Addr != "a:4780" {
			t.Fatalf("the standby sees %+v, want a at a:4780", h)
		}
		crashed := time.Now()
		crash()
		if err := <-aerr; !errors.Is(err, context.Canceled) {
			t.Fatalf("crashed runner: %v", err)
		}
		<-b.Led()
		if took := time.Since(crashed); took > 1200*time.Millisecond {
			t.Fatalf("takeover after a crash took %s, want under TTL + poll", took)
		}
		cerr := make(chan error, 1)
		go func() { cerr <- c.Run(t.Context()) }()
		time.Sleep(2 * time.Second)
		released := time.Now()
		b.Release()
		if err := <-berr; err != nil {
			t.Fatalf("released runner: %v", err)
		}
		<-c.Led()
		if took := time.Since(released); took > 150*time.Millisecond {
			t.Fatalf("takeover after a release took %s, want within a poll (100 ms)", took)
		}
	})
}

// TestRunnerDeposed: a leader whose lease another write took returns
// ErrDeposed at its next renewal.
func TestRunnerDeposed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := metastore.NewMem()
		a := runner(t, store, "a")
		errc := make(chan error, 1)
		go func() { errc <- a.Run(t.Context()) }()
		<-a.Led()
		cur, err := store.GetLease(t.Context(), "star-1")
		if err != nil {
			t.Fatal(err)
		}
		cur.Holder, cur.Addr, cur.Version = "intruder", "x:1", cur.Version+1
		if _, err := store.PutLease(t.Context(), cur); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; !errors.Is(err, ErrDeposed) {
			t.Fatalf("Run after another took the lease: %v, want ErrDeposed", err)
		}
		if a.Leading() {
			t.Fatal("a deposed runner still says it leads")
		}
	})
}
