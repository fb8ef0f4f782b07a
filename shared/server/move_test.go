package server_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
	"github.com/strandlog/strand/shared/settle"
	"github.com/strandlog/strand/shared/star"
)

// movePair starts star-0 and star-1 on shared buckets and one metastore,
// each knowing the other's URL (star-0 also knows a star-2 that never
// starts), without auth; with settled, on the pass index.
func movePair(t *testing.T, settled ...objstore.Bucket) (meta metastore.Store, a, b *node) {
	t.Helper()
	meta = newMeta(t)
	mk := func(name string, k int) []objstore.Bucket {
		var bs []objstore.Bucket
		for i := range k {
			bs = append(bs, objstore.NewMem(fmt.Sprintf("%s-%d", name, i)))
		}
		return bs
	}
	std, exp := mk("std", 1), mk("exp", 3)
	pa, pb := map[string]string{"star-2": ""}, map[string]string{} // star-2: known, never started
	a = newNodeOn(t, meta, "star-0", nil, pa, nil, std, exp, settled...)
	b = newNodeOn(t, meta, "star-1", nil, pb, nil, std, exp, settled...)
	pa["star-1"], pb["star-0"] = b.ts.URL, a.ts.URL
	return meta, a, b
}

// moveOne is movePair with an Express stream created on star-0 through a
// client of star-0, which it returns.
func moveOne(t *testing.T, name string, settled ...objstore.Bucket) (meta metastore.Store, a, b *node, c *client.Client, st client.Stream) {
	t.Helper()
	meta, a, b = movePair(t, settled...)
	c = newClient(t, a, adminTok)
	st, err := c.CreateStream(context.Background(), name, client.CreateOptions{Class: "express"})
	must(t, err)
	return meta, a, b, c, st
}

// TestMoveStreamUnderLoad moves a stream from star-0 to star-1 while three
// producers append (the client's idempotent producers, retrying through
// the move) and a tail session reads. Against an independent tally of
// what was acknowledged: every acknowledged batch is in the stream
// exactly once at its acknowledged seqs, no batch is in it twice, the
// seqs are contiguous, the tail session saw the same records and resumed
// past the move, and the old star acknowledges nothing more (ADR 0065,
// I1 and I2).
func TestMoveStreamUnderLoad(t *testing.T) {
	t.Run("refs", func(t *testing.T) { moveUnderLoad(t) })
	// On the pass index the parts star-0 wrote stay in its chain's window
	// (nothing settles here): star-1 recovers and reads them there.
	t.Run("pass-index", func(t *testing.T) { moveUnderLoad(t, objstore.NewMem("settled")) })
}

func moveUnderLoad(t *testing.T, settled ...objstore.Bucket) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	meta, a, b, c, st := moveOne(t, "logs/m", settled...)

	type acked struct {
		tag        string
		start, end uint64
	}
	var (
		mu    sync.Mutex
		tally []acked
		wg    sync.WaitGroup
		moved = make(chan struct{})
		errs  = make(chan error, 3)
	)
	const before, after = 15, 15
	for p := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pc := newClient(t, a, adminTok) // its own producers
			for k := 0; k < before+after; k++ {
				if k == before {
					<-moved
				}
				tag := fmt.Sprintf("p%d-b%d", p, k)
				ack, err := pc.Append(ctx, "logs/m", recs(2, tag), client.AppendOptions{})
				if err != nil {
					errs <- fmt.Errorf("producer %d batch %d: %w", p, k, err)
					return
				}
				mu.Lock()
				tally = append(tally, acked{tag, ack.StartSeq, ack.EndSeq})
				mu.Unlock()
			}
		}()
	}
	// A tail reader from the start.
	ts := c.OpenTailSession(ctx, "logs/m", client.FromSeq(0), client.TailOptions{})
	var seen []client.Record
	tailDone := make(chan struct{})
	var total uint64
	var totalMu sync.Mutex
	go func() {
		defer close(tailDone)
		for ts.Next() {
			seen = append(seen, ts.Batch().Records...)
			totalMu.Lock()
			n := total
			totalMu.Unlock()
			if n > 0 && uint64(len(seen)) >= n {
				return
			}
		}
	}()

	// Move once the producers are under way.
	for {
		mu.Lock()
		n := len(tally)
		mu.Unlock()
		if n >= 6 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	moveStart := time.Now()
	ms, sealSeq, err := c.MoveStream(ctx, "logs/m", "star-1")
	must(t, err)
	t.Logf("move took %v, seal at seq %d", time.Since(moveStart), sealSeq)
	close(moved)
	if ms.Leader != "star-1" {
		t.Fatalf("moved stream %+v, want leader star-1", ms)
	}
	if got, err := meta.GetStream(ctx, "logs/m"); err != nil || got.Star != "star-1" {
		t.Fatalf("metastore after the move: %+v %v", got, err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// I2: the old star acknowledges nothing more of the stream.
	id, err := format.ParseStreamID(st.ID)
	must(t, err)
	_, err = a.star.Append(ctx, id, []format.Record{{Body: []byte("late")}}, star.AppendOptions{})
	var me *star.MovedError
	if !errors.As(err, &me) || me.To != "star-1" {
		t.Fatalf("append on the old star after the move: %v, want *MovedError to star-1", err)
	}
	_, err = newClient(t, a, adminTok).CheckTail(ctx, "logs/m") // follows to star-1
	must(t, err)

	// The stream as star-1 serves it.
	tail, err := c.CheckTail(ctx, "logs/m")
	must(t, err)
	totalMu.Lock()
	total = tail.NextSeq
	totalMu.Unlock()
	res, err := c.Read(ctx, "logs/m", client.FromSeq(0), client.Limits{Count: 1000})
	must(t, err)
	if uint64(len(res.Records)) != tail.NextSeq {
		t.Fatalf("read %d records, tail %d", len(res.Records), tail.NextSeq)
	}
	at := map[uint64]string{}
	count := map[string]int{}
	commands := 0
	for i, r := range res.Records {
		if r.Seq != uint64(i) {
			t.Fatalf("record %d has seq %d: seqs not contiguous", i, r.Seq)
		}
		if format.CommandOf(format.Record{Headers: toFormat(r.Headers)}) != "" {
			commands++
			continue
		}
		tag := string(r.Body[:strings.LastIndexByte(string(r.Body), '-')])
		at[r.Seq] = tag
		count[tag]++
	}
	if commands != 1 || sealSeq == 0 || format.CommandOf(format.Record{Headers: toFormat(res.Records[sealSeq].Headers)}) != format.CommandFence {
		t.Fatalf("%d command records, seal at %d: want the one seal", commands, sealSeq)
	}
	for tag, n := range count {
		if n != 2 {
			t.Fatalf("batch %s has %d records in the stream, want 2 (once)", tag, n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(tally) != 3*(before+after) || len(count) != len(tally) {
		t.Fatalf("%d batches acknowledged, %d in the stream, want %d", len(tally), len(count), 3*(before+after))
	}
	for _, ac := range tally {
		for s := ac.start; s < ac.end; s++ {
			if at[s] != ac.tag {
				t.Fatalf("batch %s acknowledged at %d..%d, but seq %d holds %q", ac.tag, ac.start, ac.end, s, at[s])
			}
		}
	}
	// The tail session resumed past the move and saw the same records.
	select {
	case <-tailDone:
	case <-time.After(10 * time.Second):
		t.Fatalf("tail session saw %d of %d records", len(seen), total)
	}
	for i, r := range seen[:total] {
		if r.Seq != uint64(i) || string(r.Body) != string(res.Records[i].Body) {
			t.Fatalf("tail record %d: seq %d %q, want %q", i, r.Seq, r.Body, res.Records[i].Body)
		}
	}
	_ = b
}

func toFormat(hs []client.Header) []format.Header {
	out := make([]format.Header, len(hs))
	for i, h := range hs {
		out[i] = format.Header{Name: h.Name, Value: h.Value}
	}
	return out
}

// TestMoveStreamRefusals: only an admin over every stream may move; an
// unknown star, the current leader and a missing stream are refused with
// what to do, and nothing is written.
func TestMoveStreamRefusals(t *testing.T) {
	ctx := context.Background()
	meta, a, _ := movePair(t)
	na := newNode(t, meta, "star-2", true, map[string]string{"star-0": a.ts.URL})
	c := newClient(t, na, adminTok)
	_, err := newClient(t, a, adminTok).CreateStream(ctx, "logs/r", client.CreateOptions{})
	must(t, err)
	_, _, err = newClient(t, na, appendTok).MoveStream(ctx, "logs/r", "star-1")
	wantCode(t, err, connect.CodePermissionDenied)
	_, _, err = c.MoveStream(ctx, "logs/r", "star-9")
	wantCode(t, err, connect.CodeInvalidArgument)
	ca := newClient(t, a, adminTok)
	_, _, err = ca.MoveStream(ctx, "logs/missing", "star-1")
	wantCode(t, err, connect.CodeNotFound)
	_, _, err = ca.MoveStream(ctx, "logs/r", "star-0")
	wantCode(t, err, connect.CodeFailedPrecondition)
	if got, err := meta.GetStream(ctx, "logs/r"); err != nil || got.Star != "star-0" {
		t.Fatalf("stream after refused moves: %+v %v", got, err)
	}
	// A client cannot forge a seal.
	_, err = ca.Fence(ctx, "logs/r", star.MoveToken("star-1"), client.FenceOptions{CurrentToken: new(string)})
	wantCode(t, err, connect.CodeInvalidArgument)
}

// TestMoveFencedStream: a stream fenced by a writer moves with its token
// (ADR 0065): after the move the writer's appends with its token land on
// the new leader right after the seal, an append with a stale token or
// none is refused there, and the fence still reads as the writer's.
func TestMoveFencedStream(t *testing.T) {
	ctx := context.Background()
	meta, _, b, c, _ := moveOne(t, "logs/w")
	if _, err := c.Fence(ctx, "logs/w", "writer-1", client.FenceOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Fence(ctx, "logs/w", "writer-2", client.FenceOptions{CurrentToken: new("writer-1")}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Append(ctx, "logs/w", recs(2, "x"), client.AppendOptions{FenceToken: "writer-2"})
	must(t, err)
	_, seal, err := c.MoveStream(ctx, "logs/w", "star-1")
	must(t, err)
	if got, err := meta.GetStream(ctx, "logs/w"); err != nil || got.Star != "star-1" {
		t.Fatalf("leader after the move: %+v %v", got, err)
	}
	cb := newClient(t, b, adminTok)
	for _, stale := range []string{"writer-1", ""} {
		_, err = cb.Append(ctx, "logs/w", recs(1, "s"), client.AppendOptions{FenceToken: stale})
		wantCode(t, err, connect.CodeFailedPrecondition)
	}
	ack, err := c.Append(ctx, "logs/w", recs(1, "y"), client.AppendOptions{FenceToken: "writer-2"})
	must(t, err)
	if ack.StartSeq != seal+1 {
		t.Fatalf("the writer's append after the move at %d, want %d (after the seal)", ack.StartSeq, seal+1)
	}
	// The writer can still hand its fence on, which only the holder can.
	if _, err := cb.Fence(ctx, "logs/w", "writer-3", client.FenceOptions{CurrentToken: new("writer-2")}); err != nil {
		t.Fatalf("fence from the moved writer's token: %v", err)
	}
}

// TestMoveToStarWithoutTheClass: a star that has no chain of the
// stream's class (started without that class's bucket set) is refused
// as a target with failed_precondition naming the class, and nothing is
// written; a stream of the class it has moves there.
func TestMoveToStarWithoutTheClass(t *testing.T) {
	ctx := context.Background()
	meta, a, _, c, _ := moveOne(t, "logs/e")                      // express
	s2 := newNodeOn(t, meta, "star-2", nil, nil, nil, a.std, nil) // standard only
	a.peers["star-2"] = s2.ts.URL                                 // serving (ADR 0076)
	_, _, err := c.MoveStream(ctx, "logs/e", "star-2")
	wantCode(t, err, connect.CodeFailedPrecondition)
	if !strings.Contains(err.Error(), "no express chain") {
		t.Fatalf("error %v: want it to name the missing class", err)
	}
	if got, err := meta.GetStream(ctx, "logs/e"); err != nil || got.Star != "star-0" {
		t.Fatalf("stream after the refused move: %+v %v", got, err)
	}
	if _, err := c.Append(ctx, "logs/e", recs(1, "x"), client.AppendOptions{}); err != nil {
		t.Fatalf("append after the refused move (not sealed): %v", err)
	}
	_, err = c.CreateStream(ctx, "logs/std", client.CreateOptions{Class: "standard"})
	must(t, err)
	_, _, err = c.MoveStream(ctx, "logs/std", "star-2")
	must(t, err)
}

// TestMoveRollForward: the old star sealed the stream and died before the
// metastore write. Its successor (same star id, same chain) opens the
// stream sealed to star-1 while the metastore still names star-0: it
// finishes the move and answers with the new leader, which continues the
// stream after the seal.
func TestMoveRollForward(t *testing.T) {
	ctx := context.Background()
	meta, a, b, c, st := moveOne(t, "logs/f")
	_, err := c.Append(ctx, "logs/f", recs(3, "x"), client.AppendOptions{})
	must(t, err)
	id, err := format.ParseStreamID(st.ID)
	must(t, err)
	seal, err := a.star.Seal(ctx, id, "star-1")
	must(t, err)
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	must(t, a.star.Drain(dctx, id)) // absorbed; no metastore write: the star "dies" here
	if got, _ := meta.GetStream(ctx, "logs/f"); got.Star != "star-0" {
		t.Fatalf("leader %s before the roll forward", got.Star)
	}
	// The successor: a fresh server of star-0 on the same buckets.
	a.stopAbsorb()
	a2 := newNodeOn(t, meta, "star-0", nil, map[string]string{"star-1": b.ts.URL}, nil, a.std, a.exp, a.settled...)
	ack, err := newClient(t, a2, adminTok).Append(ctx, "logs/f", recs(1, "y"), client.AppendOptions{})
	must(t, err)
	if ack.StartSeq != seal.FirstSeq+1 {
		t.Fatalf("append after the roll forward at %d, want %d (after the seal)", ack.StartSeq, seal.FirstSeq+1)
	}
	if got, err := meta.GetStream(ctx, "logs/f"); err != nil || got.Star != "star-1" {
		t.Fatalf("leader after the roll forward: %+v %v", got, err)
	}
}

// TestMovePause measures the append pause of a move (docs/operations.md,
// "Stream moves"): a producer appends one record at a time while the
// stream moves 20 times between two in-process stars (memory buckets, the
// in-process absorb; refs, and the pass index); for each move, the
// longest gap between two consecutive acks that spans it.
// STRAND_MOVE_PAUSE=1 runs it (about 10 s a mode). On the pass index a
// stream moves again only once the chain it last left has settled its
// parts (priorSettled): before each move, outside the measured span,
// both chains are settled with a flush of everything.
func TestMovePause(t *testing.T) {
	if os.Getenv("STRAND_MOVE_PAUSE") == "" {
		t.Skip("a measurement: STRAND_MOVE_PAUSE=1 runs it")
	}
	t.Run("refs", func(t *testing.T) { movePause(t, nil) })
	t.Run("pass-index", func(t *testing.T) { movePause(t, objstore.NewMem("settled")) })
}

func movePause(t *testing.T, settled objstore.Bucket) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		meta    metastore.Store
		a       *node
		c       *client.Client
		settler *settle.Settler
		win     *passindex.Window
	)
	if settled == nil {
		meta, a, _, c, _ = moveOne(t, "logs/p")
	} else {
		meta, a, _, c, _ = moveOne(t, "logs/p", settled)
		win = &passindex.Window{Meta: meta, Bucket: settled}
		settler = &settle.Settler{Meta: meta, Settled: settled, PassIndex: true, FlushBytes: 1, FlushAge: time.Nanosecond, Log: slog.New(slog.DiscardHandler),
			Sets: absorb.Sets{Standard: chain.Set{Buckets: a.std, W: 1}, Express: chain.Set{Buckets: a.exp, W: 2}}}
	}
	var mu sync.Mutex
	var acks []time.Time
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		pc := newClient(t, a, adminTok)
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if _, err := pc.Append(ctx, "logs/p", recs(1, fmt.Sprint(i)), client.AppendOptions{}); err != nil {
				done <- err
				return
			}
			mu.Lock()
			acks = append(acks, time.Now())
			mu.Unlock()
		}
	}()
	type span struct{ from, to time.Time }
	var moves []span
	to := "star-1"
	for range 20 {
		time.Sleep(200 * time.Millisecond)
		for attempt := 0; settler != nil; attempt++ {
			for _, id := range []string{"star-0", "star-1"} {
				_, err := settler.Run(ctx, metastore.ChainID{Star: id, Class: metastore.Express})
				must(t, err)
			}
			st, err := meta.GetStream(ctx, "logs/p")
			must(t, err)
			if n, err := win.StreamParts(ctx, metastore.Stream{ID: st.ID, Name: st.Name, Class: st.Class, Star: st.From}, 0); err == nil && len(n) == 0 || st.From == "" {
				break
			}
			if attempt > 100 {
				t.Fatalf("the parts left on %s never settled", st.From)
			}
			time.Sleep(10 * time.Millisecond)
		}
		s := time.Now()
		_, _, err := c.MoveStream(ctx, "logs/p", to)
		must(t, err)
		moves = append(moves, span{s, time.Now()})
		to = map[string]string{"star-0": "star-1", "star-1": "star-0"}[to]
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	must(t, <-done)
	mu.Lock()
	defer mu.Unlock()
	var pauses, calls []time.Duration
	for _, m := range moves {
		var worst time.Duration
		for i := 1; i < len(acks); i++ {
			if acks[i].After(m.from) && acks[i-1].Before(m.to) {
				worst = max(worst, acks[i].Sub(acks[i-1]))
			}
		}
		pauses, calls = append(pauses, worst), append(calls, m.to.Sub(m.from))
	}
	slices.Sort(pauses)
	slices.Sort(calls)
	q := func(d []time.Duration, p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	t.Logf("MOVE PAUSE moves=%d appends=%d pause p50=%v p99=%v max=%v; MoveStream call p50=%v max=%v",
		len(pauses), len(acks), q(pauses, 0.5), q(pauses, 0.99), pauses[len(pauses)-1], q(calls, 0.5), calls[len(calls)-1])
	if pauses[len(pauses)-1] == 0 {
		t.Fatal("no ack spanned a move: the producer did not append through the moves")
	}
}

// TestConcurrentMovesOneAtATime: a second MoveStream of a stream while the
// first waits for its seal to be absorbed is refused (unavailable) and
// writes nothing; before the fix it found the stream drained (Drain
// returns at once for a stream no longer open) and moved the leader
// before the seal was absorbed, so the new star would have opened the
// stream at a stale tail.
func TestConcurrentMovesOneAtATime(t *testing.T) {
	ctx := context.Background()
	meta, a, _ := movePair(t)
	a.stopAbsorb() // the test absorbs by hand
	c, err := client.New(a.ts.URL, client.WithToken(adminTok), client.WithRetry(client.Retry{MaxAttempts: 1}))
	must(t, err)
	_, err = c.CreateStream(ctx, "logs/c", client.CreateOptions{Class: "express"})
	must(t, err)
	first := make(chan error, 1)
	go func() {
		_, _, err := c.MoveStream(ctx, "logs/c", "star-1")
		first <- err
	}()
	time.Sleep(100 * time.Millisecond) // sealed, draining
	_, _, err = c.MoveStream(ctx, "logs/c", "star-1")
	wantCode(t, err, connect.CodeUnavailable)
	if got, _ := meta.GetStream(ctx, "logs/c"); got.Star != "star-0" {
		t.Fatalf("leader %s while the seal is not absorbed", got.Star)
	}
	ch := metastore.ChainID{Star: "star-0", Class: metastore.Express}
	at, err := a.abs.Run(ctx, ch, a.star.Released(ch))
	must(t, err)
	a.star.Absorbed(ch, at)
	must(t, <-first)
	if got, _ := meta.GetStream(ctx, "logs/c"); got.Star != "star-1" {
		t.Fatalf("leader %s after the move", got.Star)
	}
}

// TestMoveToAnotherStarWhileSealed: a stream sealed for a move to star-1
// (the move interrupted before its metastore write) is not moved to
// another star: the answer says which move to finish, and finishing it
// works.
func TestMoveToAnotherStarWhileSealed(t *testing.T) {
	ctx := context.Background()
	meta, a, _, c, st := moveOne(t, "logs/s")
	s2 := newNodeOn(t, meta, "star-2", nil, nil, nil, a.std, a.exp) // has both classes' chains
	a.peers["star-2"] = s2.ts.URL                                   // serving (ADR 0076)
	id, err := format.ParseStreamID(st.ID)
	must(t, err)
	_, err = c.CheckTail(ctx, "logs/s") // opens it
	must(t, err)
	_, err = a.star.Seal(ctx, id, "star-1") // the interrupted move
	must(t, err)
	_, _, err = c.MoveStream(ctx, "logs/s", "star-2")
	wantCode(t, err, connect.CodeFailedPrecondition)
	if !strings.Contains(err.Error(), "sealed for a move to star-1 already") {
		t.Fatalf("error %v: want it to name the move to finish", err)
	}
	_, _, err = c.MoveStream(ctx, "logs/s", "star-1")
	must(t, err)
	if got, _ := meta.GetStream(ctx, "logs/s"); got.Star != "star-1" {
		t.Fatalf("leader %s after finishing the move", got.Star)
	}
}
