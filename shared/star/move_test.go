package star

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

func withStarID(id string) harnessOpt {
	return func(c *Config, _ *Options) { c.StarID = id }
}

// wantMoved fails unless err is ErrMoved naming star to.
func wantMoved(t *testing.T, err error, to, what string) {
	t.Helper()
	var me *MovedError
	if !errors.Is(err, ErrMoved) || !errors.As(err, &me) || me.To != to {
		t.Fatalf("%s: %v, want ErrMoved to %s", what, err, to)
	}
}

// sealAndRecover appends one producer batch of three records on star-0,
// seals the stream for star-1, absorbs star-0's chain into refs, drains
// the stream and returns what a star opening it recovers, with the
// producer and the first batch's ack.
func sealAndRecover(t *testing.T) (id format.StreamID, p format.ProducerID, first Ack, info StreamInfo) {
	return sealFencedAndRecover(t, "")
}

// sealFencedAndRecover is sealAndRecover of a stream fenced to token
// (unless ""): the fence takes seq 0, the batch 1..3 and the seal 4.
func sealFencedAndRecover(t *testing.T, token string) (id format.StreamID, p format.ProducerID, first Ack, info StreamInfo) {
	t.Helper()
	ctx := context.Background()
	a := newHarness(t, metastore.Standard, 1, 1)
	a.start()
	id = a.open(metastore.Standard, 1)[0]
	p = pid(7)
	var base uint64
	if token != "" {
		if _, err := a.star.Fence(ctx, id, token, nil, nil); err != nil {
			t.Fatal(err)
		}
		base = 1
	}
	first, err := a.star.Append(ctx, id, recs(3, nil2), AppendOptions{Producer: p, BatchSeq: 0, FenceToken: token})
	if err != nil {
		t.Fatal(err)
	}
	seal, err := a.star.Seal(ctx, id, "star-1")
	if err != nil || seal.FirstSeq != base+3 || seal.LastSeq != base+3 {
		t.Fatalf("seal: %+v %v, want the command record at seq %d", seal, err, base+3)
	}
	// I2: nothing more is admitted for the stream on the old star.
	_, err = a.star.Submit(ctx, id, recs(1, nil2), AppendOptions{Producer: p, BatchSeq: 1})
	wantMoved(t, err, "star-1", "append after the seal")
	_, err = a.star.Fence(ctx, id, "w", nil, nil)
	wantMoved(t, err, "star-1", "fence after the seal")
	_, _, err = a.star.Reconfigure(ctx, id, ConfigPatch{Uncapped: new(bool)})
	wantMoved(t, err, "star-1", "reconfigure after the seal")
	// A retry of an acknowledged batch still gets its original ack.
	if dup, err := a.star.Append(ctx, id, recs(3, nil2), AppendOptions{Producer: p, BatchSeq: 0, FenceToken: token}); err != nil || dup.FirstSeq != first.FirstSeq || dup.LastSeq != first.LastSeq {
		t.Fatalf("retry of batch 0 after the seal: %+v %v, want the original ack %+v", dup, err, first)
	}
	// Sealing again for the same star is a no-op; for another, refused.
	if again, err := a.star.Seal(ctx, id, "star-1"); err != nil || again != (Ack{}) {
		t.Fatalf("seal again: %+v %v, want a no-op", again, err)
	}
	_, err = a.star.Seal(ctx, id, "star-2")
	wantMoved(t, err, "star-1", "seal for another star")

	ch := metastore.ChainID{Star: "star-0", Class: metastore.Standard}
	sets := absorb.Sets{Standard: chain.Set{Star: "star-0", Buckets: a.buckets, W: 1}}
	cur, err := (&absorb.Absorber{Meta: a.meta, Sets: sets, Log: slog.New(slog.DiscardHandler)}).Run(ctx, ch, metastore.Cursor{})
	if err != nil {
		t.Fatal(err)
	}
	a.star.Absorbed(ch, cur)
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := a.star.Drain(dctx, id); err != nil {
		t.Fatalf("drain after the seal: %v", err)
	}
	// Drained, the stream is answered as moved, not as deleted.
	_, err = a.star.Submit(ctx, id, recs(1, nil2), AppendOptions{})
	wantMoved(t, err, "star-1", "append after the drain")
	_, _, err = a.star.Tail(id)
	wantMoved(t, err, "star-1", "tail after the drain")
	info, err = RecoverStream(ctx, a.meta, id, metastore.Standard, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if to, ok := Sealed(info.Commands); !ok || to != "star-1" || info.Next != base+4 {
		t.Fatalf("recovered %+v (commands %+v), want next %d sealed to star-1", info, info.Commands, base+4)
	}
	return id, p, first, info
}

// TestMoveFencedStream: a fenced stream moves with its fencing token
// (ADR 0065): the seal carries it, the new star restores it when it
// opens the stream, the writer's appends with it keep working and an
// append with a stale token or none is still refused.
func TestMoveFencedStream(t *testing.T) {
	ctx := context.Background()
	id, p, first, info := sealFencedAndRecover(t, "writer-2")
	if _, displaced, _ := format.ParseSeal(info.Commands.FenceToken); displaced != "writer-2" {
		t.Fatalf("recovered seal token %q, want it to carry writer-2", info.Commands.FenceToken)
	}
	b := newHarness(t, metastore.Standard, 1, 1, withStarID("star-1"))
	b.start()
	if err := b.star.Open(info); err != nil {
		t.Fatal(err)
	}
	if c, err := b.star.Commands(id); err != nil || c.FenceToken != "writer-2" {
		t.Fatalf("commands on the new star: %+v %v, want fenced to writer-2", c, err)
	}
	if dup, err := b.star.Append(ctx, id, recs(3, nil2), AppendOptions{Producer: p, BatchSeq: 0, FenceToken: "writer-2"}); err != nil || dup.FirstSeq != first.FirstSeq || dup.LastSeq != first.LastSeq {
		t.Fatalf("retry of batch 0 on the new star: %+v %v, want the original ack %+v", dup, err, first)
	}
	for _, stale := range []string{"writer-1", ""} {
		if _, err := b.star.Append(ctx, id, recs(1, nil2), AppendOptions{FenceToken: stale}); !errors.Is(err, ErrFenced) {
			t.Fatalf("append with token %q on the new star: %v, want ErrFenced", stale, err)
		}
	}
	next, err := b.star.Append(ctx, id, recs(2, nil2), AppendOptions{Producer: p, BatchSeq: 1, FenceToken: "writer-2"})
	if err != nil || next.FirstSeq != 5 || next.LastSeq != 6 {
		t.Fatalf("batch 1 on the new star: %+v %v, want 5..6 (after the seal)", next, err)
	}
}

// TestMoveSealThenOpen: the new star opens the sealed stream with the
// existing recovery and continues it: the next seq follows the seal, a
// retry of a batch the old star acknowledged gets its original ack (not
// written again), and the stream is unsealed there.
func TestMoveSealThenOpen(t *testing.T) {
	ctx := context.Background()
	id, p, first, info := sealAndRecover(t)
	b := newHarness(t, metastore.Standard, 1, 1, withStarID("star-1"))
	b.start()
	if err := b.star.Open(info); err != nil {
		t.Fatal(err)
	}
	if c, err := b.star.Commands(id); err != nil || c.FenceToken != "" {
		t.Fatalf("commands on the new star: %+v %v, want unsealed", c, err)
	}
	dup, err := b.star.Append(ctx, id, recs(3, nil2), AppendOptions{Producer: p, BatchSeq: 0})
	if err != nil || dup.FirstSeq != first.FirstSeq || dup.LastSeq != first.LastSeq {
		t.Fatalf("retry of batch 0 on the new star: %+v %v, want the original ack %d..%d", dup, err, first.FirstSeq, first.LastSeq)
	}
	next, err := b.star.Append(ctx, id, recs(2, nil2), AppendOptions{Producer: p, BatchSeq: 1})
	if err != nil || next.FirstSeq != 4 || next.LastSeq != 5 {
		t.Fatalf("batch 1 on the new star: %+v %v, want 4..5 (after the seal)", next, err)
	}
	// A client cannot forge a seal.
	if _, err := b.star.Fence(ctx, id, MoveToken("star-9"), nil, nil); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("fence with a move token: %v, want ErrBadCommand", err)
	}
}

// TestOpenSealedElsewhere: a star that is not the seal's target (the old
// star's successor, or any other) opens the stream sealed and admits
// nothing.
func TestOpenSealedElsewhere(t *testing.T) {
	id, p, _, info := sealAndRecover(t)
	c := newHarness(t, metastore.Standard, 1, 1, withStarID("star-0"))
	c.start()
	if err := c.star.Open(info); err != nil {
		t.Fatal(err)
	}
	_, err := c.star.Append(context.Background(), id, recs(1, nil2), AppendOptions{Producer: p, BatchSeq: 1})
	wantMoved(t, err, "star-1", "append on the old star's successor")
}

// TestSealRefusesBadTargets: a stream is not sealed for itself, for a
// star id too long for a seal token, or one holding a zero byte.
func TestSealRefusesBadTargets(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, metastore.Standard, 1, 1)
	h.start()
	ids := h.open(metastore.Standard, 2)
	for _, to := range []string{"", "star-0", "a-star-id-that-is-far-too-long-x", "star\x001"} {
		if _, err := h.star.Seal(ctx, ids[1], to); !errors.Is(err, ErrBadCommand) {
			t.Fatalf("seal for %q: %v, want ErrBadCommand", to, err)
		}
	}
	// Nothing was written: the stream still appends at seq 0.
	if a, err := h.star.Append(ctx, ids[1], recs(1, nil2), AppendOptions{}); err != nil || a.FirstSeq != 0 {
		t.Fatalf("append after refused seals: %+v %v, want seq 0", a, err)
	}
}
