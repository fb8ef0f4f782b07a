package star

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// readOnly refuses every PUT while set, as a data directory remounted
// read-only does (the directory store's error, verbatim in shape).
type readOnly struct {
	objstore.Bucket
	on *atomic.Bool
}

func (r readOnly) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	if r.on.Load() {
		return fmt.Errorf("objstore/dir: put %s/%s: %w", r.Name(), key, &fs.PathError{Op: "open", Path: "/data/" + r.Name() + "/.tmp/put-1", Err: syscall.EROFS})
	}
	return r.Bucket.PutIfAbsent(ctx, key, body)
}

// syncBuffer collects log output from the star's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// line returns the first line containing sub ("" if none).
func (s *syncBuffer) line(sub string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range strings.Split(s.b.String(), "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// waitFor polls cond (the star's own goroutines move the state) and fails
// the test if it does not hold within a generous bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i > 2000 {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readOnlyHarness is an Express star on 3 buckets (W 2) that turn
// read-only while ro is set, with a chain fencer, a 50 ms commit deadline
// and a 300 ms halt wait: its epoch halts when ro is set and recovers
// once it is cleared.
func readOnlyHarness(t *testing.T, ro *atomic.Bool, opts ...harnessOpt) *harness {
	return newHarness(t, metastore.Express, 3, 2, append([]harnessOpt{withChainFencer, func(c *Config, _ *Options) {
		c.Express.CommitDeadline = 50 * time.Millisecond
		c.HaltWait = 300 * time.Millisecond
		for i, b := range c.Express.Buckets {
			c.Express.Buckets[i] = readOnly{Bucket: b, on: ro}
		}
	}}, opts...)...)
}

// TestUnwritableStoreFailsProducersWithTheCause: every bucket turns
// read-only. The flight misses its commit deadline and halts the epoch with
// the store's own error as its reason (in the log line, the halt reason and
// strand_put_errors_total{kind="read_only"}); after HaltWait the waiting
// producer gets ErrHalted (outcome unknown) naming that error, a new append
// is refused with ErrHalted, and Health reports the halt. Once the store is
// writable again the star recovers and the pending batch is committed once.
// Regression test for issue 13 finding 9: the halt said "last error:
// <nil>" and the producer waited forever.
func TestUnwritableStoreFailsProducersWithTheCause(t *testing.T) {
	var ro atomic.Bool
	var logs syncBuffer
	h := readOnlyHarness(t, &ro, func(c *Config, _ *Options) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	h.start()
	id := h.open(metastore.Express, 1)[0]
	one := func(s string) []format.Record { return recs(1, func(int) []byte { return []byte(s) }) }
	if _, err := h.star.Append(context.Background(), id, one("before"), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	ro.Store(true)
	p, err := h.star.Submit(context.Background(), id, one("during"), AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = p.Wait(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("a producer waiting on the halted epoch never heard back")
	}
	if !errors.Is(err, ErrHalted) || !errors.Is(err, ErrOutcomeUnknown) || !strings.Contains(err.Error(), "read-only file system") {
		t.Fatalf("pending batch on a halted epoch: %v; want ErrHalted, ErrOutcomeUnknown and the store's error", err)
	}
	if _, err := h.star.Submit(context.Background(), id, one("refused"), AppendOptions{}); !errors.Is(err, ErrHalted) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("append on an epoch halted past HaltWait: %v, want plain ErrHalted", err)
	}
	hl := h.star.Health()
	if hl.OK() || len(hl.Chains) != 1 || !hl.Chains[0].Stuck || !strings.Contains(hl.String(), "read-only file system") {
		t.Fatalf("health while halted past HaltWait: ok=%v %q", hl.OK(), hl.String())
	}
	if strings.Contains(hl.Chains[0].Halted.Error(), "<nil>") {
		t.Fatalf("halt reason hides the cause: %v", hl.Chains[0].Halted)
	}
	if l := logs.line("epoch halted:"); !strings.Contains(l, "read-only file system") {
		t.Fatalf("the halt's log line hides the cause: %q", l)
	}
	var buf strings.Builder
	h.star.Metrics().Write(&buf)
	if !strings.Contains(buf.String(), `kind="read_only"`) {
		t.Fatalf("no read_only put errors in the metrics:\n%s", buf.String())
	}
	ro.Store(false)
	waitFor(t, "recovery once writable", func() bool { return h.star.Health().OK() })
	a, err := h.star.Append(context.Background(), id, one("after"), AppendOptions{})
	if err != nil || a.FirstSeq != 2 {
		t.Fatalf("append after recovery: %+v %v, want seq 2", a, err)
	}
	if got := h.history(metastore.Express)[id]; !slices.Equal(got, []string{"before", "during", "after"}) {
		t.Fatalf("chain history %q", got)
	}
}
