package star

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// ghostBucket lands every flight PUT at once but holds its answer until
// answer is closed (or the call's context ends): the copy is there, the
// writer does not know it. Poison and probe PUTs pass through.
type ghostBucket struct {
	objstore.Bucket
	answer chan struct{}
}

func (g *ghostBucket) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	err := g.Bucket.PutIfAbsent(ctx, key, body)
	if env, perr := format.ParseEnvelope(body); perr != nil || env.Kind != format.KindFlight {
		return err
	}
	select {
	case <-g.answer:
	case <-ctx.Done():
		return ctx.Err()
	}
	return err
}

// heldMint mints for real, then holds the answer until release is closed:
// the window between a recovery's mint and its release of late acks.
type heldMint struct {
	metastore.Store
	minted  chan struct{} // closed once the first mint landed
	release chan struct{}
	once    bool
	// rival: a successor mints the epoch first, so ours loses the CAS
	// (the late-acks-then-shed path of recovery).
	rival bool
}

func (m *heldMint) MintEpoch(ctx context.Context, chain metastore.ChainID, prev uint64, e metastore.Epoch) error {
	if prev == 0 || m.once {
		return m.Store.MintEpoch(ctx, chain, prev, e)
	}
	if m.rival {
		r := e
		copy(r.Nonce[:], "rival-successor!")
		if err := m.Store.MintEpoch(ctx, chain, prev, r); err != nil {
			return err
		}
		return m.Store.MintEpoch(ctx, chain, prev, e) // lost: held at the read-back
	}
	m.once = true
	err := m.Store.MintEpoch(ctx, chain, prev, e)
	close(m.minted)
	<-m.release
	return err
}

// GetEpoch holds the rival case's read-back of the lost mint (the last
// metastore call before recovery acks late and sheds).
func (m *heldMint) GetEpoch(ctx context.Context, chain metastore.ChainID, epoch uint64) (metastore.Epoch, error) {
	e, err := m.Store.GetEpoch(ctx, chain, epoch)
	if m.rival && epoch == 2 && !m.once {
		m.once = true
		close(m.minted)
		<-m.release
	}
	return e, err
}

// ghostHarness: Express K=3, W=2, every flight copy lands but is never
// answered, so the first flight halts its epoch at the commit deadline
// while it is in fact committed (the fence will find it below the cut).
func ghostHarness(t *testing.T, opts ...harnessOpt) (*harness, *heldMint, chan struct{}) {
	answer := make(chan struct{})
	hm := &heldMint{minted: make(chan struct{}), release: make(chan struct{})}
	all := append([]harnessOpt{withChainFencer, func(c *Config, _ *Options) {
		c.Express.CommitDeadline = 50 * time.Millisecond
		for i, b := range c.Express.Buckets {
			c.Express.Buckets[i] = &ghostBucket{Bucket: b, answer: answer}
		}
	}}, opts...)
	h := newHarness(t, metastore.Express, 3, 2, all...)
	hm.Store = h.meta
	h.star.meta = hm
	return h, hm, answer
}

// TestCloseRacingRecoveryDoesNotPanic: Close lands while the in-process
// recovery of a halted epoch is between its mint and its late acks. Close
// has already failed the in-flight batch; recovery must stop, not ack the
// batch a second time (which closed its done channel twice and panicked).
// Regression test for issue 13 finding 5.
// The rival case takes the other branch: the mint is lost to a successor,
// so recovery acks late below the cut and sheds (both used to finish the
// closed batch again).
func TestCloseRacingRecoveryDoesNotPanic(t *testing.T) {
	for _, rival := range []bool{false, true} {
		t.Run(map[bool]string{false: "mint-won", true: "mint-lost"}[rival], func(t *testing.T) { closeRacingRecovery(t, rival) })
	}
}

func closeRacingRecovery(t *testing.T, rival bool) {
	h, hm, _ := ghostHarness(t)
	hm.rival = rival
	if err := h.star.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := h.open(metastore.Express, 1)[0]
	p, err := h.star.Submit(context.Background(), id, recs(1, func(int) []byte { return []byte("ghost") }), AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-hm.minted: // halted at the deadline, fenced (slot 0 committed: cut 1), minted epoch 2
	case <-time.After(10 * time.Second):
		t.Fatal("the epoch never halted and recovered to its mint")
	}
	closed := make(chan struct{})
	go func() { h.star.Close(); close(closed) }()
	<-p.Done() // Close failed the in-flight batch
	_, perr := p.Result()
	close(hm.release) // the recovery resumes after Close
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	if perr == nil {
		t.Fatal("Close reported the in-flight batch as acked")
	}
	if !errors.Is(perr, ErrOutcomeUnknown) {
		t.Fatalf("in-flight batch at Close: %v", perr)
	}
	l := h.star.loglets[metastore.Express]
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.epoch != 1 || l.halted == nil {
		t.Fatalf("a closed loglet resumed recovery: epoch %d, halted %v", l.epoch, l.halted)
	}
	if l.deposed != nil {
		t.Fatalf("a closed loglet shed after Close: %v", l.deposed)
	}
}

// TestCloseTellsUnknownFromUnwritten: at Close, a batch whose flight is in
// the air (here: at W copies, its answers not yet back) fails with
// ErrOutcomeUnknown, since a successor keeps it; a batch still in the pool
// fails with plain ErrClosed. Regression test for issue 13 finding 3: both
// were ErrClosed (Unavailable: "retry"), and a retry wrote the first twice.
func TestCloseTellsUnknownFromUnwritten(t *testing.T) {
	h, _, _ := ghostHarness(t, func(c *Config, _ *Options) {
		c.Express.CommitDeadline = time.Minute
		c.Express.ParallelUploads = 1 // a second flight waits for the first
	})
	h.start()
	id := h.open(metastore.Express, 1)[0]
	inAir, err := h.star.Submit(context.Background(), id, recs(1, func(int) []byte { return []byte("in the air") }), AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	key := format.SlotKey("star-0", 1, 0)
	for landed := 0; landed < 2; {
		time.Sleep(time.Millisecond)
		landed = 0
		for _, m := range h.mems {
			if _, err := m.Get(context.Background(), key, 0, -1); err == nil {
				landed++
			}
		}
	}
	pooled, err := h.star.Submit(context.Background(), id, recs(1, func(int) []byte { return []byte("pooled") }), AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.star.Close()
	if _, err := inAir.Wait(context.Background()); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("batch at W copies when Close came: %v, want ErrOutcomeUnknown", err)
	}
	_, err = pooled.Wait(context.Background())
	if !errors.Is(err, ErrClosed) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("batch never cut: %v, want plain ErrClosed", err)
	}
}

// TestStopWaitsForFlightsInTheAir: an orderly Stop refuses new appends
// (ErrClosed: nothing written) and waits for the flight in the air, so its
// batch is acknowledged rather than reported as outcome unknown.
func TestStopWaitsForFlightsInTheAir(t *testing.T) {
	h, g, id := gatedStream(t)
	p, err := h.star.Submit(context.Background(), id, recs(1, func(int) []byte { return []byte("in the air") }), AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() { h.star.Stop(context.Background()); close(stopped) }()
	l := h.star.loglets[metastore.Standard]
	waitFor(t, "Stop to begin", func() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.stopping })
	if _, err := h.star.Submit(context.Background(), id, recs(1, func(int) []byte { return []byte("late") }), AppendOptions{}); !errors.Is(err, ErrClosed) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("append during Stop: %v, want plain ErrClosed", err)
	}
	close(g.open)
	if a, err := p.Wait(context.Background()); err != nil || a.FirstSeq != 0 {
		t.Fatalf("batch in the air at Stop: %+v %v, want acked", a, err)
	}
	<-stopped
	if h.star.Started() {
		t.Fatal("Stop left the star started")
	}
}

// gatedStream starts a Standard star (K=W=1) whose chain PUTs wait at a
// gate (close g.open to let them through), with one stream open.
func gatedStream(t *testing.T) (*harness, *gate, format.StreamID) {
	g := &gate{Bucket: objstore.NewMem("gated"), open: make(chan struct{})}
	h := newHarness(t, metastore.Standard, 1, 1, func(c *Config, _ *Options) {
		c.Standard.Buckets = []objstore.Bucket{g}
		c.Standard.CommitDeadline = time.Minute
	})
	h.start()
	return h, g, h.open(metastore.Standard, 1)[0]
}
