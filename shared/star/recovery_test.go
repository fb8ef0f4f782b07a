package star

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

func withChainFencer(c *Config, o *Options) {
	o.NewFencer = func(star string, cc ClassConfig) Fencer {
		return chain.Set{Star: star, Buckets: cc.Buckets, W: cc.W, Backoff: 5 * time.Millisecond}
	}
}

// history reads every epoch's committed slots (below its recorded cut, or
// to the end of the chain for the current epoch) and returns each stream's
// records, checking that seqs are contiguous from 0 and never repeat.
func (h *harness) history(class metastore.Class) map[format.StreamID][]string {
	h.t.Helper()
	ctx := context.Background()
	ch := metastore.ChainID{Star: "star-0", Class: class}
	head, err := h.meta.GetHead(ctx, ch)
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[format.StreamID][]string{}
	next := map[format.StreamID]uint64{}
	for e := uint64(1); e <= head.Epoch; e++ {
		rec, err := h.meta.GetEpoch(ctx, ch, e)
		if err != nil {
			h.t.Fatal(err)
		}
		for slot := uint64(0); rec.State != metastore.EpochFenced || slot < rec.Cut; slot++ {
			var obj []byte
			for _, m := range h.mems {
				b, err := m.Get(ctx, format.SlotKey("star-0", e, slot), 0, -1)
				if err != nil {
					continue
				}
				if _, perr := format.ParseFlight(b); perr == nil {
					obj = b
					break
				}
			}
			if obj == nil {
				if rec.State == metastore.EpochFenced {
					h.t.Fatalf("epoch %d slot %d below the cut %d has no flight copy", e, slot, rec.Cut)
				}
				break
			}
			f, _ := format.ParseFlight(obj)
			for _, en := range f.Entries {
				if en.FirstSeq != next[en.Stream] {
					h.t.Fatalf("epoch %d slot %d: stream %s starts at %d, want %d (gap or duplicate)", e, slot, en.Stream, en.FirstSeq, next[en.Stream])
				}
				_, rs, _ := format.DecodeSegment(obj[en.Offset : en.Offset+en.Length])
				for _, r := range rs {
					out[en.Stream] = append(out[en.Stream], string(r.Body))
				}
				next[en.Stream] += uint64(en.Count)
			}
		}
	}
	return out
}

// produce appends n single-record batches from p producers to stream id,
// whose tail is base, and returns the acked bodies in seq order. Any append
// error fails the test.
func produce(t *testing.T, s *Star, id format.StreamID, base uint64, producers, n int) []string {
	var mu sync.Mutex
	got := map[uint64]string{}
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				b := fmt.Sprintf("p%d-%d", p, i)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				a, err := s.Append(ctx, id, []format.Record{{Body: []byte(b)}}, AppendOptions{})
				cancel()
				if err != nil {
					t.Errorf("producer %d append %d: %v", p, i, err)
					return
				}
				mu.Lock()
				got[a.FirstSeq-base] = b
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	out := make([]string, len(got))
	for seq, b := range got {
		if seq >= uint64(len(out)) {
			t.Errorf("acked seq %d but only %d acks: gap", seq, len(got))
			return nil
		}
		out[seq] = b
	}
	return out
}

// TestHaltOnForeignEnvelopeRecoversInProcess: slots ahead of the writer are
// poisoned in two of three buckets (a foreign occupant). The writer halts at
// the first, fences, mints the next epoch and republishes: producers see no
// error, every acked record is on the chain once, in order.
func TestHaltOnForeignEnvelopeRecoversInProcess(t *testing.T) {
	h := newHarness(t, metastore.Express, 3, 2, withChainFencer)
	var foreign format.Nonce
	copy(foreign[:], "someone-else-16b")
	for _, slot := range []uint64{5, 6} {
		for _, m := range h.mems[:2] {
			if err := m.PutIfAbsent(context.Background(), format.SlotKey("star-0", 1, slot), format.Poison(1, slot, foreign).Bytes()); err != nil {
				t.Fatal(err)
			}
		}
	}
	h.start()
	id := h.open(metastore.Express, 1)[0]
	acked := produce(t, h.star, id, 0, 4, 40)
	if got := h.history(metastore.Express)[id]; !slices.Equal(got, acked) {
		t.Fatalf("chain history (%d records) differs from acked (%d)", len(got), len(acked))
	}
	l := h.star.loglets[metastore.Express]
	if l.m.halts.Value() == 0 {
		t.Fatal("the foreign envelope never halted the epoch")
	}
	rec, err := h.meta.GetEpoch(context.Background(), l.chain, 1)
	if err != nil || rec.State != metastore.EpochFenced || rec.Cut != 5 {
		t.Fatalf("epoch 1 = %+v (%v), want fenced at cut 5", rec, err)
	}
}

// TestWUnreachableHaltsThenRecovers: two of three buckets go down; the
// flight misses its deadline and halts the epoch; when the buckets return,
// the fence completes, the next epoch is minted, and the producers' batches
// are acked without an error.
func TestWUnreachableHaltsThenRecovers(t *testing.T) {
	h := newHarness(t, metastore.Express, 3, 2, withChainFencer, func(c *Config, _ *Options) { c.Express.CommitDeadline = 100 * time.Millisecond })
	h.start()
	id := h.open(metastore.Express, 1)[0]
	if _, err := h.star.Append(context.Background(), id, recs(1, func(int) []byte { return []byte("before") }), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	h.inj[0].SetDown(true)
	h.inj[1].SetDown(true)
	done := make(chan []string)
	go func() { done <- produce(t, h.star, id, 1, 2, 10) }()
	time.Sleep(400 * time.Millisecond)
	h.inj[0].SetDown(false)
	h.inj[1].SetDown(false)
	acked := <-done
	got := h.history(metastore.Express)[id]
	if len(acked) != 20 || got[0] != "before" || !slices.Equal(got[1:], acked) {
		t.Fatalf("history %v, acked %v", got, acked)
	}
	if h.star.loglets[metastore.Express].m.halts.Value() == 0 {
		t.Fatal("expected a halt while W was unreachable")
	}
}

// TestPausedZombieNeverAcks: star A's uploads are paused; star B with the
// same id takes over (fence, mint). When A wakes, its puts meet B's poison:
// A halts, loses the mint, sheds leadership, and never releases an ack for
// a batch that did not commit.
func TestPausedZombieNeverAcks(t *testing.T) {
	meta := metastore.NewMem()
	mems := []*objstore.Mem{objstore.NewMem("b0"), objstore.NewMem("b1"), objstore.NewMem("b2")}
	g := make(chan struct{})
	var gated []objstore.Bucket
	var plain []objstore.Bucket
	for _, m := range mems {
		gated = append(gated, &gate{Bucket: m, open: g})
		plain = append(plain, m)
	}
	mk := func(bs []objstore.Bucket) *Star {
		cfg := Defaults()
		cfg.Standard = ClassConfig{}
		cfg.Express = ClassConfig{Buckets: bs, W: 2, MemoryBufferMiB: 8, ParallelUploads: 4, FlushDeadline: time.Millisecond, FlightKiB: 64, CommitDeadline: 30 * time.Second}
		var o Options
		withChainFencer(&cfg, &o)
		s, err := New(cfg, meta, o)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := mk(gated)
	// A's start-up probe goes through the gate's non-chain path.
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	id := sid(0)
	a.Open(StreamInfo{ID: id, Class: metastore.Express})
	p, err := a.Submit(context.Background(), id, recs(1, func(int) []byte { return []byte("zombie") }), AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // the flight is cut and its puts wait at the gate
	b := mk(plain)
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rec, err := meta.GetEpoch(context.Background(), metastore.ChainID{Star: "star-0", Class: metastore.Express}, 1)
	if err != nil || rec.State != metastore.EpochFenced || rec.Cut != 0 {
		t.Fatalf("epoch 1 after takeover: %+v %v", rec, err)
	}
	close(g) // the zombie wakes
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ack, err := p.Wait(ctx)
	if !errors.Is(err, ErrNotLeader) {
		t.Fatalf("zombie's batch: ack %+v err %v, want ErrNotLeader and no ack", ack, err)
	}
	if tail, _, _ := a.Tail(id); tail != 0 {
		t.Fatalf("zombie acked tail %d", tail)
	}
	if _, err := a.Append(context.Background(), id, recs(1, func(int) []byte { return nil }), AppendOptions{}); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("deposed star accepted an append: %v", err)
	}
	// The new leader serves.
	b.Open(StreamInfo{ID: id, Class: metastore.Express})
	if a2, err := b.Append(context.Background(), id, recs(1, func(int) []byte { return []byte("live") }), AppendOptions{}); err != nil || a2.FirstSeq != 0 {
		t.Fatal(a2, err)
	}
}
