package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/objstore/objstoretest"
)

// recorder is a fake sleep that records the delays it is asked for.
type recorder struct {
	mu sync.Mutex
	ds []time.Duration
}

func (r *recorder) sleep(ctx context.Context, d time.Duration) error {
	r.mu.Lock()
	r.ds = append(r.ds, d)
	r.mu.Unlock()
	return ctx.Err()
}

func (r *recorder) delays() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ds)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestFaultsConformanceNoFaults(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		return objstore.WithFaults(objstore.NewMem("mem"), objstore.NewInjector(1))
	})
}

// Latency alone (with a fake clock) must not change any outcome.
func TestFaultsConformanceWithLatency(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		inj := objstore.NewInjector(2)
		inj.SetSleep((&recorder{}).sleep)
		must(t, inj.SetLatency(5*time.Millisecond, 50*time.Millisecond))
		return objstore.WithFaults(objstore.NewMem("mem"), inj)
	})
}

// A put's latency covering its call (SetPutLatencyCoversCall) changes no
// outcome either.
func TestFaultsConformancePutLatencyCoversCall(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		inj := objstore.NewInjector(3)
		inj.SetSleep((&recorder{}).sleep)
		inj.SetPutLatencyCoversCall(time.Now)
		must(t, inj.SetLatency(5*time.Millisecond, 50*time.Millisecond))
		return objstore.WithFaults(objstore.NewMem("mem"), inj)
	})
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(math.Ceil(q*float64(len(s))))-1]
}

func near(got, want time.Duration, tol float64) bool {
	return math.Abs(float64(got)/float64(want)-1) <= tol
}

func TestLatencyQuantiles(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ p50, p99 time.Duration }{
		{10 * time.Millisecond, 80 * time.Millisecond},   // S3 Standard-like
		{3 * time.Millisecond, 6 * time.Millisecond},     // Express-like
		{200 * time.Microsecond, 200 * time.Microsecond}, // constant
		{time.Millisecond, 500 * time.Millisecond},       // very heavy tail
	} {
		t.Run(fmt.Sprintf("%v-%v", c.p50, c.p99), func(t *testing.T) {
			inj := objstore.NewInjector(7)
			rec := &recorder{}
			inj.SetSleep(rec.sleep)
			must(t, inj.SetLatency(c.p50, c.p99, objstore.OpHead))
			b := objstore.WithFaults(objstore.NewMem("m"), inj)
			const samples = 40000
			for range samples {
				b.Head(ctx, "k")
			}
			// Other operations have no latency configured.
			b.Get(ctx, "k", 0, -1)
			ds := rec.delays()
			if len(ds) != samples {
				t.Fatalf("%d delays recorded, want %d", len(ds), samples)
			}
			p50, p99 := quantile(ds, 0.50), quantile(ds, 0.99)
			t.Logf("empirical p50 %v p99 %v", p50, p99)
			if !near(p50, c.p50, 0.03) {
				t.Errorf("p50 %v, want about %v", p50, c.p50)
			}
			if !near(p99, c.p99, 0.08) {
				t.Errorf("p99 %v, want about %v", p99, c.p99)
			}
			if c.p50 == c.p99 && (ds[0] != c.p50 || quantile(ds, 1) != c.p50) {
				t.Errorf("constant latency varies: first %v max %v", ds[0], quantile(ds, 1))
			}
		})
	}
}

func TestLatencyRespectsContext(t *testing.T) {
	inj := objstore.NewInjector(1) // default sleep: real timer with context
	must(t, inj.SetLatency(time.Hour, time.Hour))
	b := objstore.WithFaults(objstore.NewMem("m"), inj)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	err := b.PutIfAbsent(ctx, "k", []byte("x"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("cancelled call slept %v", d)
	}
	inj.Clear()
	if _, err := b.Head(context.Background(), "k"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("put cancelled during latency wrote: %v", err)
	}
}

func TestErrorRate(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem("m")
	inj := objstore.NewInjector(3)
	must(t, inj.SetErrorRate(0.3))
	b := objstore.WithFaults(mem, inj)
	const n = 10000
	failed := 0
	for i := range n {
		key := fmt.Sprintf("k%05d", i)
		err := b.PutIfAbsent(ctx, key, []byte("x"))
		switch {
		case err == nil:
		case errors.Is(err, objstore.ErrUnavailable):
			failed++
			if _, herr := mem.Head(ctx, key); !errors.Is(herr, objstore.ErrNotFound) {
				t.Fatalf("failed put of %s wrote: %v", key, herr)
			}
		default:
			t.Fatalf("unexpected error %v", err)
		}
	}
	if rate := float64(failed) / n; math.Abs(rate-0.3) > 0.02 {
		t.Fatalf("failure rate %.3f, want about 0.3", rate)
	}
	if mem.Len() != n-failed {
		t.Fatalf("%d objects, want %d", mem.Len(), n-failed)
	}
	if inj.Faults() != int64(failed) {
		t.Fatalf("Faults() = %d, want %d", inj.Faults(), failed)
	}

	// A failed Delete does nothing; error rate can target one operation.
	must(t, inj.SetErrorRate(0))
	must(t, inj.SetErrorRate(1, objstore.OpDelete))
	key := mem.Keys()[0]
	if err := b.Delete(ctx, key); !errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("Delete: %v, want ErrUnavailable", err)
	}
	if _, err := b.Head(ctx, key); err != nil {
		t.Fatalf("failed Delete deleted: %v", err)
	}
}

func TestBucketDown(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem("m")
	must(t, mem.PutIfAbsent(ctx, "there", []byte("x")))
	inj := objstore.NewInjector(4)
	rec := &recorder{}
	inj.SetSleep(rec.sleep)
	must(t, inj.SetLatency(time.Second, 2*time.Second))
	b := objstore.WithFaults(mem, inj)
	inj.SetDown(true)
	for i := range 50 {
		checks := []error{
			b.PutIfAbsent(ctx, fmt.Sprintf("new%d", i), []byte("y")),
			b.Delete(ctx, "there"),
		}
		_, err := b.Get(ctx, "there", 0, -1)
		checks = append(checks, err)
		_, err = b.Head(ctx, "there")
		checks = append(checks, err)
		_, err = b.List(ctx, "")
		checks = append(checks, err)
		for j, err := range checks {
			if !errors.Is(err, objstore.ErrUnavailable) {
				t.Fatalf("call %d while down: %v, want ErrUnavailable", j, err)
			}
		}
	}
	if got := mem.Keys(); !slices.Equal(got, []string{"there"}) {
		t.Fatalf("bucket changed while down: %q", got)
	}
	if len(rec.delays()) != 0 {
		t.Fatalf("a down bucket fails at once, but %d delays were applied", len(rec.delays()))
	}
	inj.SetDown(false)
	if got, err := b.Get(ctx, "there", 0, -1); err != nil || string(got) != "x" {
		t.Fatalf("after up: %q, %v", got, err)
	}
}

func TestAmbiguousForced(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem("m")
	inj := objstore.NewInjector(5)
	b := objstore.WithFaults(mem, inj)

	// Landed: the write happens, the answer is lost.
	inj.ForceAmbiguous(2, true)
	for _, k := range []string{"a", "b"} {
		if err := b.PutIfAbsent(ctx, k, []byte("body-"+k)); !errors.Is(err, objstore.ErrAmbiguous) {
			t.Fatalf("put %s: %v, want ErrAmbiguous", k, err)
		}
		if got, err := mem.Get(ctx, k, 0, -1); err != nil || string(got) != "body-"+k {
			t.Fatalf("landed ambiguous put of %s: %q, %v", k, got, err)
		}
	}
	// The retry the caller makes finds its own object.
	if err := b.PutIfAbsent(ctx, "a", []byte("body-a")); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("retry after ambiguity: %v, want ErrExists", err)
	}

	// Lost: nothing is written, still ErrAmbiguous.
	inj.ForceAmbiguous(1, false)
	if err := b.PutIfAbsent(ctx, "c", []byte("body-c")); !errors.Is(err, objstore.ErrAmbiguous) {
		t.Fatalf("put c: %v, want ErrAmbiguous", err)
	}
	if _, err := mem.Head(ctx, "c"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("lost ambiguous put wrote: %v", err)
	}
	// Forcing is used up: the next put is normal.
	if err := b.PutIfAbsent(ctx, "c", []byte("body-c")); err != nil {
		t.Fatalf("put after forced ambiguity: %v", err)
	}

	// A landed-ambiguous put over an existing key is ambiguous too, and
	// changes nothing.
	inj.ForceAmbiguous(1, true)
	if err := b.PutIfAbsent(ctx, "c", []byte("other")); !errors.Is(err, objstore.ErrAmbiguous) {
		t.Fatalf("ambiguous put over existing key: %v", err)
	}
	if got, _ := mem.Get(ctx, "c", 0, -1); string(got) != "body-c" {
		t.Fatalf("existing object changed to %q", got)
	}
	if inj.Faults() != 4 {
		t.Fatalf("Faults() = %d, want 4", inj.Faults())
	}
}

func TestAmbiguousRandom(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem("m")
	inj := objstore.NewInjector(6)
	must(t, inj.SetAmbiguous(0.2, 0.1))
	b := objstore.WithFaults(mem, inj)
	const n = 10000
	var ok, ambLanded, ambLost int
	for i := range n {
		key := fmt.Sprintf("k%05d", i)
		err := b.PutIfAbsent(ctx, key, []byte(key))
		_, herr := mem.Head(ctx, key)
		landed := herr == nil
		switch {
		case err == nil && landed:
			ok++
		case errors.Is(err, objstore.ErrAmbiguous) && landed:
			ambLanded++
		case errors.Is(err, objstore.ErrAmbiguous) && !landed:
			ambLost++
		default:
			t.Fatalf("put %s: %v, landed %v", key, err, landed)
		}
	}
	t.Logf("ok %d, ambiguous landed %d, ambiguous lost %d", ok, ambLanded, ambLost)
	if math.Abs(float64(ambLanded)/n-0.2) > 0.02 || math.Abs(float64(ambLost)/n-0.1) > 0.02 {
		t.Fatalf("ambiguous rates %.3f landed, %.3f lost; want about 0.2, 0.1",
			float64(ambLanded)/n, float64(ambLost)/n)
	}
	// Only puts are ever ambiguous.
	for range 100 {
		if _, err := b.Get(ctx, "k00000", 0, -1); err != nil && !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("Get: %v", err)
		}
	}
}

func bitDiff(a, b []byte) int {
	d := 0
	for i := range a {
		d += bits.OnesCount8(a[i] ^ b[i])
	}
	return d
}

func TestCorruptForced(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem("m")
	body := []byte("the envelope of a committed batch")
	must(t, mem.PutIfAbsent(ctx, "k", body))
	must(t, mem.PutIfAbsent(ctx, "empty", nil))
	inj := objstore.NewInjector(8)
	b := objstore.WithFaults(mem, inj)

	inj.ForceCorrupt(20, objstore.CorruptFlip)
	for range 20 {
		got, err := b.Get(ctx, "k", 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(body) || bitDiff(got, body) != 1 {
			t.Fatalf("flip: %q (len %d), want one bit off %q", got, len(got), body)
		}
	}
	// Ranged reads are corrupted within the range.
	inj.ForceCorrupt(1, objstore.CorruptFlip)
	got, err := b.Get(ctx, "k", 4, 8)
	if err != nil || len(got) != 8 || bitDiff(got, body[4:12]) != 1 {
		t.Fatalf("ranged flip: %q, %v", got, err)
	}
	if got, _ := b.Get(ctx, "k", 0, -1); !bytes.Equal(got, body) {
		t.Fatalf("forced corruption not used up: %q", got)
	}

	inj.ForceCorrupt(20, objstore.CorruptTruncate)
	for range 20 {
		got, err := b.Get(ctx, "k", 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) >= len(body) || !bytes.HasPrefix(body, got) {
			t.Fatalf("truncate: %q is not a strict prefix of %q", got, body)
		}
	}
	// An empty read cannot be corrupted; a missing key is still missing.
	inj.ForceCorrupt(2, objstore.CorruptTruncate)
	if got, err := b.Get(ctx, "empty", 0, -1); err != nil || len(got) != 0 {
		t.Fatalf("empty: %q, %v", got, err)
	}
	if _, err := b.Get(ctx, "missing", 0, -1); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	if got, _ := mem.Get(ctx, "k", 0, -1); !bytes.Equal(got, body) {
		t.Fatalf("stored object was changed: %q", got)
	}
	if inj.Faults() != 41 {
		t.Fatalf("Faults() = %d, want 41", inj.Faults())
	}
}

func TestCorruptRandom(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem("m")
	body := bytes.Repeat([]byte{0x5a}, 100)
	must(t, mem.PutIfAbsent(ctx, "k", body))
	inj := objstore.NewInjector(9)
	must(t, inj.SetCorrupt(0.1, 0.05))
	b := objstore.WithFaults(mem, inj)
	const n = 20000
	var flipped, truncated int
	for range n {
		got, err := b.Get(ctx, "k", 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case bytes.Equal(got, body):
		case len(got) == len(body) && bitDiff(got, body) == 1:
			flipped++
		case len(got) < len(body) && bytes.HasPrefix(body, got):
			truncated++
		default:
			t.Fatalf("unexpected body %x", got)
		}
	}
	if math.Abs(float64(flipped)/n-0.1) > 0.01 || math.Abs(float64(truncated)/n-0.05) > 0.01 {
		t.Fatalf("flipped %d, truncated %d of %d; want about 10%% and 5%%", flipped, truncated, n)
	}
}

func TestOnCallTraceAndCounters(t *testing.T) {
	ctx := context.Background()
	inj := objstore.NewInjector(10)
	var trace []string
	inj.OnCall(func(op objstore.Op, key string) { trace = append(trace, op.String()+" "+key) })
	b := objstore.WithFaults(objstore.NewMem("m"), inj)
	must(t, b.PutIfAbsent(ctx, "chains/a", []byte("x")))
	b.Get(ctx, "chains/a", 0, -1)
	b.Head(ctx, "chains/a")
	inj.SetDown(true)
	b.Delete(ctx, "chains/a") // traced even when it fails
	inj.SetDown(false)
	b.List(ctx, "chains/")
	b.Get(ctx, "nope", 0, 1)
	want := []string{"put chains/a", "get chains/a", "head chains/a", "delete chains/a", "list chains/", "get nope"}
	if !slices.Equal(trace, want) {
		t.Fatalf("trace:\n%s\nwant:\n%s", strings.Join(trace, "\n"), strings.Join(want, "\n"))
	}
	for op, n := range map[objstore.Op]int64{
		objstore.OpPut: 1, objstore.OpGet: 2, objstore.OpHead: 1, objstore.OpDelete: 1, objstore.OpList: 1,
	} {
		if got := inj.Calls(op); got != n {
			t.Errorf("Calls(%v) = %d, want %d", op, got, n)
		}
	}
	if b.Name() != "m" {
		t.Fatalf("Name = %q", b.Name())
	}
}

func TestCountersConcurrent(t *testing.T) {
	ctx := context.Background()
	inj := objstore.NewInjector(11)
	must(t, inj.SetErrorRate(0.5))
	b := objstore.WithFaults(objstore.NewMem("m"), inj)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 250 {
				b.PutIfAbsent(ctx, fmt.Sprintf("%d/%d", g, i), nil)
				b.Head(ctx, "x")
			}
		})
	}
	wg.Wait()
	if inj.Calls(objstore.OpPut) != 2000 || inj.Calls(objstore.OpHead) != 2000 {
		t.Fatalf("calls put %d head %d, want 2000 each", inj.Calls(objstore.OpPut), inj.Calls(objstore.OpHead))
	}
}

// The same seed and the same sequence of calls make the same decisions.
func TestSeedReplays(t *testing.T) {
	run := func(seed int64) string {
		ctx := context.Background()
		inj := objstore.NewInjector(seed)
		rec := &recorder{}
		inj.SetSleep(rec.sleep)
		must(t, inj.SetLatency(time.Millisecond, 20*time.Millisecond))
		must(t, inj.SetErrorRate(0.1))
		must(t, inj.SetAmbiguous(0.1, 0.1))
		must(t, inj.SetCorrupt(0.1, 0.1))
		b := objstore.WithFaults(objstore.NewMem("m"), inj)
		var out strings.Builder
		for i := range 300 {
			key := fmt.Sprintf("k%d", i%40)
			err := b.PutIfAbsent(ctx, key, []byte(key+"-body"))
			got, gerr := b.Get(ctx, key, 0, -1)
			fmt.Fprintf(&out, "%v|%x|%v\n", err, got, gerr)
		}
		fmt.Fprint(&out, rec.delays())
		return out.String()
	}
	a, b := run(42), run(42)
	if a != b {
		t.Fatal("same seed, different decisions")
	}
	if a == run(43) {
		t.Fatal("different seeds, identical decisions")
	}
}

func TestInjectorRejectsBadSettings(t *testing.T) {
	inj := objstore.NewInjector(1)
	for name, err := range map[string]error{
		"p99 < p50":         inj.SetLatency(10*time.Millisecond, time.Millisecond),
		"p50 zero":          inj.SetLatency(0, time.Millisecond),
		"negative":          inj.SetLatency(-time.Millisecond, time.Millisecond),
		"unknown op":        inj.SetLatency(time.Millisecond, time.Millisecond, objstore.Op(99)),
		"error rate > 1":    inj.SetErrorRate(1.5),
		"error rate NaN":    inj.SetErrorRate(math.NaN()),
		"ambiguous sum > 1": inj.SetAmbiguous(0.6, 0.6),
		"ambiguous < 0":     inj.SetAmbiguous(-0.1, 0),
		"corrupt sum > 1":   inj.SetCorrupt(0.7, 0.4),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	must(t, inj.SetLatency(0, 0)) // clears
}

func TestClearRemovesFaults(t *testing.T) {
	ctx := context.Background()
	inj := objstore.NewInjector(12)
	rec := &recorder{}
	inj.SetSleep(rec.sleep)
	must(t, inj.SetLatency(time.Millisecond, 2*time.Millisecond))
	must(t, inj.SetErrorRate(1))
	must(t, inj.SetAmbiguous(1, 0))
	must(t, inj.SetCorrupt(1, 0))
	inj.ForceAmbiguous(5, false)
	inj.ForceCorrupt(5, objstore.CorruptTruncate)
	inj.SetDown(true)
	inj.Clear()
	b := objstore.WithFaults(objstore.NewMem("m"), inj)
	must(t, b.PutIfAbsent(ctx, "k", []byte("v")))
	if got, err := b.Get(ctx, "k", 0, -1); err != nil || string(got) != "v" {
		t.Fatalf("after Clear: %q, %v", got, err)
	}
	if len(rec.delays()) != 0 || inj.Faults() != 0 {
		t.Fatalf("after Clear: %d delays, %d faults", len(rec.delays()), inj.Faults())
	}
}

// TestCorruptViewKeepsTheStoredBytes: a corrupted View (objstore.Viewer
// through the fault wrapper) is the wrapper's copy: the bytes the
// wrapped memory bucket holds, which View hands out, stay as put.
func TestCorruptViewKeepsTheStoredBytes(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem("m")
	body := []byte("the envelope of a committed batch")
	must(t, mem.PutIfAbsent(ctx, "k", body))
	inj := objstore.NewInjector(9)
	b := objstore.WithFaults(mem, inj)
	inj.ForceCorrupt(1, objstore.CorruptFlip)
	got, err := objstore.View(ctx, b, "k", 0, -1)
	if err != nil || bitDiff(got, body) != 1 {
		t.Fatalf("corrupted view: %q, %v", got, err)
	}
	if held, _ := objstore.View(ctx, mem, "k", 0, -1); !bytes.Equal(held, body) {
		t.Fatalf("the corruption reached the stored bytes: %q", held)
	}
	if got, err := objstore.View(ctx, b, "k", 0, -1); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("view after the forced corruption: %q, %v", got, err)
	}
}

// advancingBucket's puts take took on the test's clock.
type advancingBucket struct {
	objstore.Bucket
	clock *time.Time
	took  time.Duration
}

func (a *advancingBucket) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	*a.clock = a.clock.Add(a.took)
	return a.Bucket.PutIfAbsent(ctx, key, body)
}

// SetPutLatencyCoversCall: a put's delay covers the wrapped call (the
// call first, then the rest of the delay), where without it the delay
// comes first and the call after; a call longer than the delay waits no
// more; a ctx that ends in the rest answers ErrAmbiguous, the put landed;
// an injected failure still comes first and writes nothing.
func TestPutLatencyCoversCall(t *testing.T) {
	const delay = 10 * time.Millisecond
	for _, tc := range []struct {
		name          string
		cover, fail   bool
		took          time.Duration
		cancelInSleep bool
		wantSleep     time.Duration // 0: no sleep
		landedAtSleep bool
		wantErr       error
		wantLanded    bool
	}{
		{name: "off", took: 3 * time.Millisecond, wantSleep: delay, wantLanded: true},
		{name: "covers", cover: true, took: 3 * time.Millisecond, wantSleep: delay - 3*time.Millisecond, landedAtSleep: true, wantLanded: true},
		{name: "call longer than the delay", cover: true, took: 15 * time.Millisecond, wantLanded: true},
		{name: "ctx ends in the rest", cover: true, took: 3 * time.Millisecond, cancelInSleep: true, wantSleep: delay - 3*time.Millisecond, landedAtSleep: true, wantErr: objstore.ErrAmbiguous, wantLanded: true},
		{name: "failure first", cover: true, fail: true, took: 3 * time.Millisecond, wantSleep: delay, wantErr: objstore.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := time.Unix(1700000000, 0)
			mem := objstore.NewMem("m")
			inj := objstore.NewInjector(1)
			must(t, inj.SetLatency(delay, delay, objstore.OpPut))
			if tc.fail {
				must(t, inj.SetErrorRate(1, objstore.OpPut))
			}
			if tc.cover {
				inj.SetPutLatencyCoversCall(func() time.Time { return clock })
			}
			var slept []time.Duration
			landed := false
			inj.SetSleep(func(ctx context.Context, d time.Duration) error {
				slept = append(slept, d)
				_, err := mem.Head(ctx, "k")
				landed = err == nil
				if tc.cancelInSleep {
					return context.Canceled
				}
				return nil
			})
			b := objstore.WithFaults(&advancingBucket{Bucket: mem, clock: &clock, took: tc.took}, inj)
			err := b.PutIfAbsent(context.Background(), "k", []byte("x"))
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("put: %v, want %v", err, tc.wantErr)
			}
			if tc.wantSleep == 0 && len(slept) != 0 || tc.wantSleep != 0 && (len(slept) != 1 || slept[0] != tc.wantSleep) {
				t.Fatalf("slept %v, want %v", slept, tc.wantSleep)
			}
			if len(slept) == 1 && landed != tc.landedAtSleep {
				t.Fatalf("landed before the wait: %v, want %v", landed, tc.landedAtSleep)
			}
			if _, err := mem.Head(context.Background(), "k"); (err == nil) != tc.wantLanded {
				t.Fatalf("landed: %v, want %v", err == nil, tc.wantLanded)
			}
		})
	}
}
