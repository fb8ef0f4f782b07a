package chain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/objstore"
)

// fakeClock advances instantly on After: retries never sleep for real.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waits   int
	onAfter func(n int) // called with the number of waits so far
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1700000000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.waits++
	n, hook, now := c.waits, c.onAfter, c.now
	c.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	ch := make(chan time.Time, 1)
	ch <- now
	return ch
}

func (c *fakeClock) Sleep(d time.Duration) { <-c.After(d) }

type rig struct {
	set  Set
	mems []*objstore.Mem
	injs []*objstore.Injector
	clk  *fakeClock
}

// newRig builds a set of k memory buckets behind fault wrappers.
func newRig(t *testing.T, k, w int) *rig {
	t.Helper()
	r := &rig{clk: newFakeClock()}
	var buckets []objstore.Bucket
	for i := range k {
		m := objstore.NewMem(fmt.Sprintf("b%d", i))
		inj := objstore.NewInjector(int64(i + 1))
		inj.OnCall(func(op objstore.Op, key string) {
			if op == objstore.OpDelete {
				t.Errorf("chain deleted %s in bucket %d", key, i)
			}
		})
		r.mems = append(r.mems, m)
		r.injs = append(r.injs, inj)
		buckets = append(buckets, objstore.WithFaults(m, inj))
	}
	// No hedging: the fake clock fires at once, and these tests check the
	// strict fall-through order (TestHedgedReads covers hedging).
	r.set = Set{Star: "star-0", Buckets: buckets, W: w, Clock: r.clk, RetryFor: time.Minute, Hedge: -1}
	return r
}

var (
	writerNonce = format.Nonce{0xaa, 1}
	fencerNonce = format.Nonce{0xfe, 1}
	otherNonce  = format.Nonce{0xfe, 2}
)

func flightBytes(epoch, slot uint64) []byte {
	b := format.NewBuilder()
	b.Reset(epoch, slot, writerNonce)
	sid := format.StreamID{0xab, byte(slot)}
	ts := int64(1700000000000 + slot)
	rec := format.AppendRecord(nil, format.Record{TimestampMs: ts, Body: fmt.Appendf(nil, "record of slot %d", slot)})
	b.BeginSegment(sid, slot*10)
	b.AddRecords(rec, 1, ts, ts)
	b.EndSegment()
	return slices.Clone(b.Finish())
}

// put stores body at the slot key in the given buckets, directly.
func (r *rig) put(t *testing.T, epoch, slot uint64, body []byte, buckets ...int) {
	t.Helper()
	key := format.SlotKey(r.set.Star, epoch, slot)
	for _, i := range buckets {
		if err := r.mems[i].PutIfAbsent(context.Background(), key, body); err != nil {
			t.Fatal(err)
		}
	}
}

// states reads what every bucket holds at the slot, directly.
func (r *rig) states(t *testing.T, epoch, slot uint64) []State {
	t.Helper()
	key := format.SlotKey(r.set.Star, epoch, slot)
	out := make([]State, len(r.mems))
	for i, m := range r.mems {
		body, err := m.Get(context.Background(), key, 0, -1)
		if errors.Is(err, objstore.ErrNotFound) {
			out[i] = Missing
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		env, err := format.ParseEnvelope(body)
		if err != nil {
			out[i] = Junk
			continue
		}
		out[i] = copyOf(env).For(epoch, slot).State
	}
	return out
}

func TestClassify(t *testing.T) {
	const (
		U = Unknown
		M = Missing
		F = Flight
		P = Poison
		J = Junk
	)
	for _, c := range []struct {
		w         int
		states    []State
		want      Verdict
		canCommit bool
		canDie    bool
	}{
		{1, []State{M}, Undecided, true, true},
		{1, []State{F}, Committed, true, false},
		{1, []State{P}, Dead, false, true},
		{1, []State{J}, Undecided, false, false},
		{1, []State{U}, Undecided, true, true},
		{2, []State{M, M, M}, Undecided, true, true},
		{2, []State{F, M, M}, Undecided, true, true},
		{2, []State{F, F, M}, Committed, true, false},
		{2, []State{F, P, F}, Committed, true, false},
		{2, []State{P, P, F}, Dead, false, true},
		{2, []State{P, M, P}, Dead, false, true},
		{2, []State{F, P, M}, Undecided, true, true},
		{2, []State{F, P, J}, Undecided, false, false},
		{2, []State{F, J, M}, Undecided, true, false},
		{2, []State{J, M, M}, Undecided, true, true},
		{2, []State{U, P, M}, Undecided, true, true},
		{2, []State{U, U, F}, Undecided, true, true},
		{3, []State{F, F, F, P, P}, Committed, true, false},
		{3, []State{F, F, P, P, P}, Dead, false, true},
		{3, []State{F, F, P, P, M}, Undecided, true, true},
		{3, []State{F, F, J, P, M}, Undecided, true, false},
		{3, []State{P, P, J, J, M}, Undecided, false, true},
	} {
		got := Classify(c.w, c.states)
		tl := Count(c.states)
		if got != c.want || tl.CanCommit(c.w) != c.canCommit || tl.CanDie(len(c.states), c.w) != c.canDie {
			t.Errorf("W=%d %v: %v canCommit=%t canDie=%t, want %v %t %t", c.w, c.states, got, tl.CanCommit(c.w), tl.CanDie(len(c.states), c.w), c.want, c.canCommit, c.canDie)
		}
	}
	// Never both: exhaustively over every assignment for K <= 5.
	all := []State{Unknown, Missing, Flight, Poison, Junk}
	for k := 1; k <= 5; k++ {
		for w := 1; w <= k; w++ {
			states := make([]State, k)
			var rec func(i int)
			rec = func(i int) {
				if i == k {
					tl := Count(states)
					if tl.Flights >= w && tl.Poisons >= k-w+1 {
						t.Fatalf("K=%d W=%d %v both committed and dead", k, w, states)
					}
					return
				}
				for _, s := range all {
					states[i] = s
					rec(i + 1)
				}
			}
			rec(0)
		}
	}
}

func TestParseSlotKey(t *testing.T) {
	star, e, s, ok := ParseSlotKey(format.SlotKey("star-7", 3, 41))
	if !ok || star != "star-7" || e != 3 || s != 41 {
		t.Fatalf("got %q %d %d %t", star, e, s, ok)
	}
	for _, k := range []string{"", "chains/", "chains/s/1/2", "streams/x/y", "chains/s/00000000000000000003", "chains//00000000000000000003/00000000000000000041", "chains/s/0000000000000000000x/00000000000000000041"} {
		if _, _, _, ok := ParseSlotKey(k); ok {
			t.Errorf("%q parsed", k)
		}
	}
}

func TestReadEnvelope(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, 1, 1)
	key := func(slot uint64) string { return format.SlotKey("star-0", 3, slot) }
	r.put(t, 3, 1, flightBytes(3, 1), 0)
	r.put(t, 3, 2, format.Poison(3, 2, fencerNonce).Bytes(), 0)
	r.put(t, 3, 3, []byte("not an envelope at all, but long enough to be read as sixty bytes.."), 0)
	r.put(t, 3, 4, flightBytes(3, 5), 0) // another slot's flight at this key
	r.put(t, 3, 6, format.Poison(2, 6, fencerNonce).Bytes(), 0)
	r.put(t, 3, 7, nil, 0) // empty object
	for slot, want := range map[uint64]State{0: Missing, 1: Flight, 2: Poison, 3: Junk, 4: Junk, 6: Junk, 7: Junk} {
		c, err := r.set.ReadEnvelope(ctx, 0, key(slot))
		if err != nil || c.State != want {
			t.Errorf("slot %d: %v %v, want %v", slot, c.State, err, want)
		}
		if want == Junk && c.Err == nil {
			t.Errorf("slot %d: junk without a reason", slot)
		}
	}
	c, _ := r.set.ReadEnvelope(ctx, 0, key(1))
	if c.Env.Nonce != writerNonce || c.Env.Slot != 1 || c.Env.FooterOff == 0 {
		t.Errorf("flight envelope %+v", c.Env)
	}
	// A key that is not a slot key is classified by kind alone.
	if err := r.mems[0].PutIfAbsent(ctx, "other", flightBytes(9, 9)); err != nil {
		t.Fatal(err)
	}
	if c, err := r.set.ReadEnvelope(ctx, 0, "other"); err != nil || c.State != Flight || c.For(9, 8).State != Junk {
		t.Errorf("other key: %v %v", c.State, err)
	}
	// One bounded GET of 60 bytes.
	before := r.injs[0].Calls(objstore.OpGet)
	r.set.ReadEnvelope(ctx, 0, key(1))
	if got := r.injs[0].Calls(objstore.OpGet) - before; got != 1 {
		t.Errorf("%d GETs", got)
	}
	// Unavailable: returned for the caller to retry.
	r.injs[0].SetDown(true)
	if _, err := r.set.ReadEnvelope(ctx, 0, key(1)); !errors.Is(err, objstore.ErrUnavailable) {
		t.Errorf("down: %v", err)
	}
}

func TestFenceEmpty(t *testing.T) {
	for _, kw := range [][2]int{{1, 1}, {3, 2}, {5, 3}, {3, 1}, {3, 3}} {
		k, w := kw[0], kw[1]
		r := newRig(t, k, w)
		cut, err := r.set.Fence(context.Background(), 3, 0, fencerNonce)
		if err != nil || cut != 0 {
			t.Fatalf("K=%d W=%d: cut %d, %v", k, w, cut, err)
		}
		st := r.states(t, 3, 0)
		if tl := Count(st); tl.Poisons != k-w+1 || tl.Missing != w-1 {
			t.Errorf("K=%d W=%d: %v: want exactly K-W+1 poisons", k, w, st)
		}
		if puts := r.injs[0].Calls(objstore.OpPut); puts != 1 {
			t.Errorf("K=%d W=%d: %d puts on bucket 0", k, w, puts)
		}
	}
}

func TestFenceCommittedPrefix(t *testing.T) {
	r := newRig(t, 3, 2)
	// Slots 4..8 committed at W, in varying buckets; slot 9 empty.
	placements := [][]int{{0, 1}, {1, 2}, {0, 2}, {0, 1, 2}, {2, 0}}
	for i, p := range placements {
		r.put(t, 5, uint64(4+i), flightBytes(5, uint64(4+i)), p...)
	}
	// A foreign poison in the third bucket of one committed slot changes nothing.
	r.put(t, 5, 4, format.Poison(5, 4, otherNonce).Bytes(), 2)
	cut, err := r.set.Fence(context.Background(), 5, 4, fencerNonce)
	if err != nil || cut != 9 {
		t.Fatalf("cut %d, %v; want 9", cut, err)
	}
	for i := range placements {
		if v := Classify(2, r.states(t, 5, uint64(4+i))); v != Committed {
			t.Errorf("slot %d %v after fence", 4+i, v)
		}
	}
	if v := Classify(2, r.states(t, 5, 9)); v != Dead {
		t.Errorf("cut slot is %v", v)
	}
	// Nothing was written to committed slots: 2 puts in all, at the cut.
	var puts int64
	for _, inj := range r.injs {
		puts += inj.Calls(objstore.OpPut)
	}
	if puts != 2 {
		t.Errorf("%d puts, want 2", puts)
	}
	// Fencing again (a second fencer, later) computes the same cut and writes nothing new.
	cut2, err := r.set.Fence(context.Background(), 5, 4, otherNonce)
	if err != nil || cut2 != cut {
		t.Fatalf("second fence: %d, %v", cut2, err)
	}
}

func TestFencePartialSlot(t *testing.T) {
	// K=3 W=2: slot 1 reached one bucket; slot 2 reached W (committed but
	// above the cut: garbage for the probe, untouched by the fence).
	r := newRig(t, 3, 2)
	r.put(t, 1, 0, flightBytes(1, 0), 0, 1, 2)
	r.put(t, 1, 1, flightBytes(1, 1), 1)
	r.put(t, 1, 2, flightBytes(1, 2), 0, 2)
	cut, err := r.set.Fence(context.Background(), 1, 0, fencerNonce)
	if err != nil || cut != 1 {
		t.Fatalf("cut %d, %v", cut, err)
	}
	if got := r.states(t, 1, 1); !slices.Equal(got, []State{Poison, Flight, Poison}) {
		t.Errorf("cut slot %v", got)
	}
	if got := r.states(t, 1, 2); !slices.Equal(got, []State{Flight, Missing, Flight}) {
		t.Errorf("slot above the cut %v", got)
	}
	// K=5 W=3: two copies landed; three poisons kill it.
	r5 := newRig(t, 5, 3)
	r5.put(t, 1, 0, flightBytes(1, 0), 1, 3)
	cut, err = r5.set.Fence(context.Background(), 1, 0, fencerNonce)
	if err != nil || cut != 0 {
		t.Fatalf("K=5: cut %d, %v", cut, err)
	}
	if got := r5.states(t, 1, 0); !slices.Equal(got, []State{Poison, Flight, Poison, Flight, Poison}) {
		t.Errorf("K=5 cut slot %v", got)
	}
}

func TestFenceAmbiguousPoison(t *testing.T) {
	for _, landed := range []bool{true, false} {
		t.Run(fmt.Sprintf("landed=%t", landed), func(t *testing.T) {
			r := newRig(t, 3, 2)
			r.put(t, 2, 0, flightBytes(2, 0), 2)
			r.injs[0].ForceAmbiguous(1, landed)
			r.injs[1].ForceAmbiguous(1, landed)
			cut, err := r.set.Fence(context.Background(), 2, 0, fencerNonce)
			if err != nil || cut != 0 {
				t.Fatalf("cut %d, %v", cut, err)
			}
			if got := r.states(t, 2, 0); !slices.Equal(got, []State{Poison, Poison, Flight}) {
				t.Errorf("slot %v", got)
			}
			wantPuts := int64(1)
			if !landed {
				wantPuts = 2 // read back missing, put again
			}
			if got := r.injs[0].Calls(objstore.OpPut); got != wantPuts {
				t.Errorf("%d puts to bucket 0, want %d", got, wantPuts)
			}
		})
	}
	// An ambiguous put whose slot a writer filled meanwhile: read back, a flight counts as a flight.
	r := newRig(t, 1, 1)
	r.set.Buckets[0] = &racer{Bucket: r.set.Buckets[0], before: func(key string) {
		r.mems[0].PutIfAbsent(context.Background(), key, flightBytes(2, 0))
	}, ambiguous: true}
	if v, err := r.set.FenceSlot(context.Background(), 2, 0, fencerNonce); err != nil || v != Committed {
		t.Fatalf("verdict %v, %v", v, err)
	}
}

// racer runs before() ahead of its first put (a writer racing the fencer),
// then answers that put ErrAmbiguous if ambiguous.
type racer struct {
	objstore.Bucket
	before    func(key string)
	ambiguous bool
	done      bool
}

func (r *racer) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	if !r.done {
		r.done = true
		r.before(key)
		err := r.Bucket.PutIfAbsent(ctx, key, body)
		if r.ambiguous {
			return fmt.Errorf("racer (put said %v): %w", err, objstore.ErrAmbiguous)
		}
		return err
	}
	return r.Bucket.PutIfAbsent(ctx, key, body)
}

func TestFenceForeignPoison(t *testing.T) {
	r := newRig(t, 3, 2)
	r.put(t, 4, 0, format.Poison(4, 0, otherNonce).Bytes(), 1)
	cut, err := r.set.Fence(context.Background(), 4, 0, fencerNonce)
	if err != nil || cut != 0 {
		t.Fatalf("cut %d, %v", cut, err)
	}
	if got := r.states(t, 4, 0); !slices.Equal(got, []State{Poison, Poison, Missing}) {
		t.Errorf("slot %v", got)
	}
	// A writer racing in between read and poison: ErrExists, read back a flight.
	r = newRig(t, 3, 2)
	r.put(t, 4, 0, flightBytes(4, 0), 0)
	r.set.Buckets[1] = &racer{Bucket: r.set.Buckets[1], before: func(key string) {
		r.mems[1].PutIfAbsent(context.Background(), key, flightBytes(4, 0))
	}}
	cut, err = r.set.Fence(context.Background(), 4, 0, fencerNonce)
	if err != nil || cut != 1 {
		t.Fatalf("race: cut %d, %v; want 1 (slot 0 committed under the fencer)", cut, err)
	}
}

func TestFenceBucketDown(t *testing.T) {
	r := newRig(t, 3, 2)
	r.put(t, 1, 0, flightBytes(1, 0), 0, 1)
	r.put(t, 1, 1, flightBytes(1, 1), 0, 1)
	r.injs[2].SetDown(true)
	cut, err := r.set.Fence(context.Background(), 1, 0, fencerNonce)
	if err != nil || cut != 2 {
		t.Fatalf("cut %d, %v", cut, err)
	}
	if got := r.states(t, 1, 2); !slices.Equal(got, []State{Poison, Poison, Missing}) {
		t.Errorf("cut slot %v", got)
	}

	// The down bucket decides the slot: fence waits for it, then decides.
	r = newRig(t, 3, 2)
	r.put(t, 1, 0, flightBytes(1, 0), 0)
	r.injs[2].SetDown(true)
	r.clk.onAfter = func(n int) {
		if n == 3 {
			r.injs[2].SetDown(false)
		}
	}
	cut, err = r.set.Fence(context.Background(), 1, 0, fencerNonce)
	if err != nil || cut != 0 {
		t.Fatalf("recovering: cut %d, %v", cut, err)
	}
	if got := r.states(t, 1, 0); !slices.Equal(got, []State{Flight, Poison, Poison}) {
		t.Errorf("recovering: %v", got)
	}

	// It stays down: a clear error after RetryFor, no real sleeping.
	r = newRig(t, 3, 2)
	r.put(t, 1, 0, flightBytes(1, 0), 0)
	r.injs[2].SetDown(true)
	start := time.Now()
	_, err = r.set.Fence(context.Background(), 1, 0, fencerNonce)
	if !errors.Is(err, ErrDeadline) {
		t.Fatalf("stays down: %v", err)
	}
	t.Logf("error: %v", err)
	if r.clk.Now().Sub(time.Unix(1700000000, 0)) < time.Minute || time.Since(start) > 5*time.Second {
		t.Errorf("deadline not on the fake clock")
	}
}

func TestFenceCorruptCopies(t *testing.T) {
	// A read corrupted in transit heals on a reread.
	r := newRig(t, 3, 2)
	r.put(t, 1, 0, flightBytes(1, 0), 0, 1)
	r.injs[0].ForceCorrupt(1, objstore.CorruptFlip)
	cut, err := r.set.Fence(context.Background(), 1, 0, fencerNonce)
	if err != nil || cut != 1 {
		t.Fatalf("transit corruption: cut %d, %v", cut, err)
	}
	if got := r.states(t, 1, 0); !slices.Equal(got, []State{Flight, Flight, Missing}) {
		t.Errorf("committed slot was written: %v", got)
	}

	// Junk at rest that leaves room for K-W+1 poisons: dead.
	r = newRig(t, 3, 2)
	bad := flightBytes(1, 0)
	bad[20] ^= 1
	r.put(t, 1, 0, bad, 0)
	cut, err = r.set.Fence(context.Background(), 1, 0, fencerNonce)
	if err != nil || cut != 0 {
		t.Fatalf("junk: cut %d, %v", cut, err)
	}
	if got := r.states(t, 1, 0); !slices.Equal(got, []State{Junk, Poison, Poison}) {
		t.Errorf("junk: %v", got)
	}

	// Junk that blocks both outcomes: ErrStuck, and nothing written.
	r = newRig(t, 3, 2)
	r.put(t, 1, 0, flightBytes(1, 0), 0)
	r.put(t, 1, 0, bad, 1)
	_, err = r.set.Fence(context.Background(), 1, 0, fencerNonce)
	if !errors.Is(err, ErrStuck) {
		t.Fatalf("stuck: %v", err)
	}
	if got := r.states(t, 1, 0); !slices.Equal(got, []State{Flight, Junk, Missing}) {
		t.Errorf("stuck slot was written: %v", got)
	}
}

func TestFenceInvalid(t *testing.T) {
	for _, s := range []Set{
		{Star: "s", W: 1},
		{Star: "s", Buckets: []objstore.Bucket{objstore.NewMem("a")}, W: 2},
		{Buckets: []objstore.Bucket{objstore.NewMem("a")}, W: 1},
		{Star: "s", Buckets: []objstore.Bucket{nil}, W: 1},
	} {
		if _, err := s.Fence(context.Background(), 1, 0, fencerNonce); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v", s, err)
		}
	}
}

// TestFenceConcurrent runs the real Fence: a writer landing a window of
// slots in parallel, at random, while two fencers race; both must return
// the same cut, every slot below it committed and the cut dead.
func TestFenceConcurrent(t *testing.T) {
	for round := range 60 {
		kw := [][2]int{{1, 1}, {3, 2}, {5, 3}}[round%3]
		r := newRig(t, kw[0], kw[1])
		for _, inj := range r.injs {
			inj.SetLatency(20*time.Microsecond, 200*time.Microsecond)
		}
		ctx := context.Background()
		var wg sync.WaitGroup
		for slot := range uint64(6) {
			for i, b := range r.set.Buckets {
				if (int(slot)+i+round)%4 == 0 {
					continue // some copies never land
				}
				wg.Go(func() { b.PutIfAbsent(ctx, format.SlotKey("star-0", 7, slot), flightBytes(7, slot)) })
			}
		}
		cuts := make([]uint64, 2)
		errs := make([]error, 2)
		for f := range 2 {
			wg.Go(func() { cuts[f], errs[f] = r.set.Fence(ctx, 7, 0, format.Nonce{0xfe, byte(f)}) })
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil || cuts[0] != cuts[1] {
			t.Fatalf("round %d: cuts %v errs %v", round, cuts, errs)
		}
		for s := range cuts[0] {
			if v := Classify(kw[1], r.states(t, 7, s)); v != Committed {
				t.Fatalf("round %d: slot %d below cut %d is %v", round, s, cuts[0], v)
			}
		}
		if v := Classify(kw[1], r.states(t, 7, cuts[0])); v != Dead {
			t.Fatalf("round %d: cut %d is %v", round, cuts[0], v)
		}
	}
}
