package server_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
	"github.com/strandlog/strand/shared/server"
	"github.com/strandlog/strand/shared/settle"
)

// TestReview3OneWindowSettled (ADR 0065 two windows, attack, pass index):
// a stream moved from star-0 to star-1, each chain settled on its own
// and in either order, with settle's default merging on (a flush may
// merge the previous small ref, which another chain wrote). After each
// step, a read from every seq through either star returns the stream
// from there to its tail once each, in order, each record the body it
// was acknowledged with; the next append lands at the tail.
func TestReview3OneWindowSettled(t *testing.T) {
	for _, order := range [][]string{{"star-1", "star-0"}, {"star-0", "star-1"}} {
		t.Run(order[0]+"-first", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			settled := objstore.NewMem("settled")
			meta, a, b, c, st := moveOne(t, "logs/o", settled)
			cb := appendAndMove(ctx, t, c, b, "logs/o", 6) // 0-5 "old-i", then the seal: 6
			// 0-5, the seal at 6.
			want := tagged("old", 0, 6, 6)
			appendAt := func(tag string, n int) {
				t.Helper()
				ack, err := cb.Append(ctx, "logs/o", recs(n, tag), client.AppendOptions{})
				must(t, err)
				for i := range n {
					want[ack.StartSeq+uint64(i)] = fmt.Sprintf("%s-%d", tag, i)
				}
				if ack.StartSeq != uint64(len(want)-n) {
					t.Fatalf("%s appended at %d, want the tail %d", tag, ack.StartSeq, len(want)-n)
				}
			}
			appendAt("b1", 3) // 7-9
			mst := metastore.Stream{ID: st.ID, Name: "logs/o", Class: metastore.Express, Star: "star-1", From: "star-0"}
			for i, chainStar := range order {
				settleOneChain(ctx, t, meta, a, settled, mst, chainStar, uint64(len(want)-1))
				checkMovedReads(ctx, t, fmt.Sprintf("after settling %s", chainStar), []*client.Client{c, cb}, "logs/o", want)
				appendAt(fmt.Sprintf("b%d", i+2), 2)
				checkMovedReads(ctx, t, fmt.Sprintf("after settling %s and an append", chainStar), []*client.Client{c, cb}, "logs/o", want)
			}
			refs, err := meta.QueryRefs(ctx, st.ID, 0, 100)
			must(t, err)
			// star-0 first: star-1's flush merged star-0's small ref
			// across the seal; the case the attack is after.
			spans := false
			for _, r := range refs {
				spans = spans || r.FirstSeq <= 6 && r.LastSeq > 6
			}
			if order[0] == "star-0" && !spans {
				t.Fatalf("refs %d, none merged across the seal at 6: the cross-chain merge was not exercised", len(refs))
			}
		})
	}
}

// moveOnceSettled moves stream name (id), led by star-1 after a move
// from star-0, on to star to through cb: refused (failed_precondition,
// nothing written) while star-0's window holds its parts, then, once
// settle flushed star-0's chain up to seq upTo, moved.
func moveOnceSettled(ctx context.Context, t *testing.T, meta metastore.Store, a *node, settled objstore.Bucket, cb *client.Client, id, name, to string, upTo uint64) {
	t.Helper()
	_, _, err := cb.MoveStream(ctx, name, to)
	wantCode(t, err, connect.CodeFailedPrecondition)
	got, err := meta.GetStream(ctx, name)
	must(t, err)
	if got.Star != "star-1" || got.From != "star-0" {
		t.Fatalf("after the refused move to %s: %+v, want led by star-1 from star-0", to, got)
	}
	mst := metastore.Stream{ID: id, Name: name, Class: metastore.Express, Star: "star-1", From: "star-0"}
	settleOneChain(ctx, t, meta, a, settled, mst, "star-0", upTo)
	if _, _, err := cb.MoveStream(ctx, name, to); err != nil {
		t.Fatalf("the move to %s once star-0 settled: %v", to, err)
	}
}

// settleOneChain waits until the windows and refs of st reach upTo
// (absorb runs in the background), then runs settle on chainStar's
// Express chain only, with default merging, until its window holds no
// part of st.
func settleOneChain(ctx context.Context, t *testing.T, meta metastore.Store, a *node, settled objstore.Bucket, st metastore.Stream, chainStar string, upTo uint64) {
	t.Helper()
	settler := &settle.Settler{Meta: meta, Settled: settled, PassIndex: true, FlushBytes: 1, FlushAge: time.Nanosecond, Log: slog.New(slog.DiscardHandler),
		Sets: absorb.Sets{Standard: chain.Set{Buckets: a.std, W: 1}, Express: chain.Set{Buckets: a.exp, W: 2}}}
	win := &passindex.Window{Meta: meta, Bucket: settled}
	reach := func() uint64 {
		var top uint64
		parts, err := win.StreamParts(ctx, st, 0)
		must(t, err)
		for _, p := range parts {
			top = max(top, p.LastSeq)
		}
		if last, err := meta.LastRef(ctx, st.ID); err == nil {
			top = max(top, last.LastSeq)
		}
		return top
	}
	one := st
	one.Star, one.From = chainStar, ""
	for attempt := 0; ; attempt++ {
		if reach() >= upTo {
			_, err := settler.Run(ctx, metastore.ChainID{Star: chainStar, Class: metastore.Express})
			must(t, err)
			parts, err := win.StreamParts(ctx, one, 0)
			must(t, err)
			if len(parts) == 0 {
				return
			}
		}
		if attempt > 200 {
			t.Fatalf("%s's window never let go of %s's parts (reach %d, want %d)", chainStar, st.Name, reach(), upTo)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkMovedReads reads name from every seq through every client and
// checks the records against want (seq -> body; "" for a command record
// whose body is not checked): from seq k, every seq from k to the tail
// once, in order, and the tail len(want).
func checkMovedReads(ctx context.Context, t *testing.T, what string, cs []*client.Client, name string, want map[uint64]string) {
	t.Helper()
	tail := uint64(len(want))
	for ci, rc := range cs {
		for from := range tail + 1 {
			res, err := rc.Read(ctx, name, client.FromSeq(from), client.Limits{Count: 1000})
			must(t, err)
			if res.NextSeq != tail {
				t.Fatalf("%s: client %d, read from %d: tail %d, want %d", what, ci, from, res.NextSeq, tail)
			}
			if len(res.Records) != int(tail-from) {
				var got []uint64
				for _, r := range res.Records {
					got = append(got, r.Seq)
				}
				t.Fatalf("%s: client %d, read from %d: seqs %v, want %d to %d once each", what, ci, from, got, from, tail-1)
			}
			for i, r := range res.Records {
				if r.Seq != from+uint64(i) {
					t.Fatalf("%s: client %d, read from %d: record %d has seq %d", what, ci, from, i, r.Seq)
				}
				if w := want[r.Seq]; w != "" && string(r.Body) != w {
					t.Fatalf("%s: client %d, read from %d: seq %d reads %q, want %q", what, ci, from, r.Seq, r.Body, w)
				}
			}
		}
	}
}

// TestReview3MoveToADownStar (ADR 0065, attack): star-1 started once (it
// has its chains) and is down now. A move of star-0's stream there would
// strand it: its appends go to a star nobody serves, and no move can
// bring it back, since only a stream's leader serves MoveStream. The move
// is refused (failed_precondition, naming the star) and nothing is written: the stream is still
// star-0's, unsealed, and takes the next append at its tail.
func TestReview3MoveToADownStar(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	meta, _, b, c, _ := moveOne(t, "logs/down")
	_, err := c.Append(ctx, "logs/down", recs(3, "x"), client.AppendOptions{}) // 0-2
	must(t, err)
	b.ts.Close()
	b.star.Close()
	_, _, err = c.MoveStream(ctx, "logs/down", "star-1")
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !errors.Is(err, server.ErrTargetDown) && !strings.Contains(err.Error(), "star star-1") {
		st, _ := meta.GetStream(ctx, "logs/down")
		t.Fatalf("a move to a star that is down: %v; the stream is led by %s now", err, st.Star)
	}
	wantUnmoved(ctx, t, meta, c, "logs/down", 3)
}

// wantUnmoved checks that a refused move wrote nothing: the stream is
// led by star-0 and never moved, and its next append through c lands at
// next (no seal before it).
func wantUnmoved(ctx context.Context, t *testing.T, meta metastore.Store, c *client.Client, name string, next uint64) {
	t.Helper()
	st, err := meta.GetStream(ctx, name)
	must(t, err)
	if st.Star != "star-0" || st.From != "" {
		t.Fatalf("after the refused move the stream is %+v, want led by star-0, never moved", st)
	}
	ack, err := c.Append(ctx, name, recs(1, "y"), client.AppendOptions{})
	must(t, err)
	if ack.StartSeq != next {
		t.Fatalf("the append after the refused move is at %d, want %d (no seal)", ack.StartSeq, next)
	}
}

// tagged is the want map of records tag-0.. at seqs first to first+n-1
// (as recs writes them) and command records ("": not compared) at seals.
func tagged(tag string, first uint64, n int, seals ...uint64) map[uint64]string {
	want := map[uint64]string{}
	for i := range n {
		want[first+uint64(i)] = fmt.Sprintf("%s-%d", tag, i)
	}
	for _, s := range seals {
		want[s] = ""
	}
	return want
}

// TestReview3MoveAgainBeforeSettle (ADR 0065 two windows, attack, pass
// index, three stars): a stream moved star-0 -> star-1 is moved on to
// star-2 at once, while star-0's window still holds its first parts. The
// window reads only the leader's chain and From's, so after a second move
// star-0's parts would be read by nobody: the move is refused
// (failed_precondition, nothing written, the stream still star-1's). Once
// settle has flushed star-0's parts into refs, the move goes, and star-2
// reads the whole stream once, in order: star-0's records from refs,
// star-1's from its window (From), its own after them.
func TestReview3MoveAgainBeforeSettle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	settled := objstore.NewMem("settled")
	meta, a, b, c, st := moveOne(t, "logs/again", settled)
	s2 := newNodeOn(t, meta, "star-2", nil, map[string]string{"star-0": a.ts.URL, "star-1": b.ts.URL}, nil, a.std, a.exp, settled)
	a.peers["star-2"], b.peers["star-2"] = s2.ts.URL, s2.ts.URL
	cb := appendAndMove(ctx, t, c, b, "logs/again", 4) // 0-3 "old-i", then the seal: 4
	// 0-3, the seals at 4 and 7.
	want := tagged("old", 0, 4, 4, 7)
	ack, err := cb.Append(ctx, "logs/again", recs(2, "mid"), client.AppendOptions{}) // 5-6
	must(t, err)
	if ack.StartSeq != 5 {
		t.Fatalf("star-1's append at %d, want 5", ack.StartSeq)
	}
	want[5], want[6] = "mid-0", "mid-1"
	moveOnceSettled(ctx, t, meta, a, settled, cb, st.ID, "logs/again", "star-2", 6) // the seal: 7
	c2 := newClient(t, s2, adminTok)
	ack, err = c2.Append(ctx, "logs/again", recs(2, "new"), client.AppendOptions{}) // 8-9
	must(t, err)
	if ack.StartSeq != 8 {
		t.Fatalf("star-2's append at %d, want 8", ack.StartSeq)
	}
	want[8], want[9] = "new-0", "new-1"
	checkMovedReads(ctx, t, "after the second move", []*client.Client{c2, cb, c}, "logs/again", want)
}

// failingMoves is a metastore whose MoveStream fails, unavailable, while
// down is set.
type failingMoves struct {
	metastore.Store
	down atomic.Bool
}

func (f *failingMoves) MoveStream(ctx context.Context, name, id, from, to string) error {
	if f.down.Load() {
		return fmt.Errorf("review3: injected: %w", metastore.ErrUnavailable)
	}
	return f.Store.MoveStream(ctx, name, id, from, to)
}

// TestReview3SealedMoveFinishesItself (ADR 0065 crash points, attack):
// the metastore refuses the move's leader write for longer than the
// operator's MoveStream call retries, so the call fails with the stream
// sealed and drained on star-0 and the metastore still naming star-0. The
// old star lives on (no successor opens the stream, so no roll forward),
// and nobody calls MoveStream again. Once the metastore is back, the
// writer's next append must land at star-1 after the seal: the star
// holding the seal finishes the move when it refuses a call for the
// sealed stream. Before, star-0 sent the writer to star-1 and star-1 sent
// it back to star-0 until an operator retried the move.
func TestReview3SealedMoveFinishesItself(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw := newMeta(t)
	meta := &failingMoves{Store: raw}
	std, exp := []objstore.Bucket{objstore.NewMem("std-0")}, []objstore.Bucket{objstore.NewMem("exp-0"), objstore.NewMem("exp-1"), objstore.NewMem("exp-2")}
	pa, pb := map[string]string{}, map[string]string{}
	a := newNodeOn(t, meta, "star-0", nil, pa, nil, std, exp)
	b := newNodeOn(t, raw, "star-1", nil, pb, nil, std, exp)
	pa["star-1"], pb["star-0"] = b.ts.URL, a.ts.URL
	c := newClient(t, a, adminTok)
	_, err := c.CreateStream(ctx, "logs/p", client.CreateOptions{Class: "express"})
	must(t, err)
	_, err = c.Append(ctx, "logs/p", recs(3, "x"), client.AppendOptions{}) // 0-2
	must(t, err)
	meta.down.Store(true)
	mctx, mcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, _, err = c.MoveStream(mctx, "logs/p", "star-1") // the seal: 3
	mcancel()
	if err == nil {
		t.Fatal("the move succeeded with the metastore refusing its write")
	}
	if st, err := raw.GetStream(ctx, "logs/p"); err != nil || st.Star != "star-0" {
		t.Fatalf("after the failed move: %+v %v, want still led by star-0", st, err)
	}
	meta.down.Store(false)
	actx, acancel := context.WithTimeout(ctx, 5*time.Second)
	defer acancel()
	ack, err := c.Append(actx, "logs/p", recs(1, "y"), client.AppendOptions{})
	if err != nil {
		st, _ := raw.GetStream(ctx, "logs/p")
		t.Fatalf("the writer's append after the metastore came back, no operator retry: %v (stream %+v)", err, st)
	}
	if ack.StartSeq != 4 {
		t.Fatalf("the append landed at %d, want 4 (after the seal at 3)", ack.StartSeq)
	}
	if st, err := raw.GetStream(ctx, "logs/p"); err != nil || st.Star != "star-1" || st.From != "star-0" {
		t.Fatalf("after the append: %+v %v, want led by star-1 from star-0", st, err)
	}
}

// TestReview3DeposedStarCannotMove (ADR 0065 against a standby takeover,
// attack): star-0's process p1 has the stream open when a successor p2 of
// star-0 takes its chains over (a standby taking the lease while p1 still
// runs). A MoveStream sent to p1 must not move the stream: its seal
// cannot commit in a chain p2 fenced, so the metastore still names star-0
// and p2 appends right after the records p1 acknowledged, with no seal
// between.
func TestReview3DeposedStarCannotMove(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	meta, a, b, c, _ := moveOne(t, "logs/dep")
	_, err := c.Append(ctx, "logs/dep", recs(3, "x"), client.AppendOptions{}) // 0-2, through p1
	must(t, err)
	p2 := newNodeOn(t, meta, "star-0", nil, map[string]string{"star-1": b.ts.URL}, nil, a.std, a.exp)
	mctx, mcancel := context.WithTimeout(ctx, 300*time.Millisecond) // the client retries unavailable
	_, _, err = c.MoveStream(mctx, "logs/dep", "star-1")
	mcancel()
	if code := connect.CodeOf(err); code != connect.CodeUnavailable && code != connect.CodeDeadlineExceeded {
		t.Fatalf("the deposed process's move: %v, want unavailable (its seal fenced)", err)
	}
	c2 := newClient(t, p2, adminTok)
	wantUnmoved(ctx, t, meta, c2, "logs/dep", 3) // the successor's append
	res, err := c2.Read(ctx, "logs/dep", client.FromSeq(0), client.Limits{Count: 10})
	must(t, err)
	if len(res.Records) != 4 || string(res.Records[3].Body) != "y-0" {
		t.Fatalf("the successor reads %d records, want the 3 acknowledged by p1 and its own", len(res.Records))
	}
}

// TestReview3MoveBackWaitsForSettle (ADR 0065 two windows, attack, pass
// index): a stream moved star-0 -> star-1 by mistake is moved back at
// once, before settle flushed star-0's parts. Moving back looks safe for
// reads (the window reads the leader's chain and From's, and a move back
// swaps them), but star-0's window would then hold two runs of the
// stream's parts with star-1's seqs between them, and settle's flush of
// star-0's chain stops on that for good (the move simulation's third
// star found it when this review let a move back go at once: "segment
// of the stream at 7, want at 6"). So the move back is refused
// (failed_precondition, nothing written) until star-0 has settled; then
// it goes, and every read through either star is the stream once, in
// order, and the next append lands after the second seal.
func TestReview3MoveBackWaitsForSettle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	settled := objstore.NewMem("settled")
	meta, a, b, c, st := moveOne(t, "logs/back", settled)
	cb := appendAndMove(ctx, t, c, b, "logs/back", 3) // 0-2 "old-i", then the seal: 3
	// 0-2, the seals at 3 and 6.
	want := tagged("old", 0, 3, 3, 6)
	_, err := cb.Append(ctx, "logs/back", recs(2, "mid"), client.AppendOptions{}) // 4-5
	must(t, err)
	want[4], want[5] = "mid-0", "mid-1"
	moveOnceSettled(ctx, t, meta, a, settled, cb, st.ID, "logs/back", "star-0", 5) // the seal: 6
	ack, err := c.Append(ctx, "logs/back", recs(2, "new"), client.AppendOptions{}) // 7-8
	must(t, err)
	if ack.StartSeq != 7 {
		t.Fatalf("the append after the move back at %d, want 7", ack.StartSeq)
	}
	want[7], want[8] = "new-0", "new-1"
	checkMovedReads(ctx, t, "after the move back", []*client.Client{c, cb}, "logs/back", want)
}

// TestReview3ReopenAfterOneChainSettled (ADR 0065 I4, attack, pass
// index): after a move, settle flushed the new leader's parts into refs
// while star-0's older parts are still in its window. A successor of
// star-1 (a takeover) reopens the stream: its tail is after star-1's
// last append, read from the refs, not from star-0's window part (which
// is older). The next append lands there, and a read from 0 is the
// stream once. Before this test only TestSimMoves' schedules (seed 6,
// then 48 of 60) saw the mutant moved-window-last-part-wins.
func TestReview3ReopenAfterOneChainSettled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	settled := objstore.NewMem("settled")
	meta, a, b, c, st := moveOne(t, "logs/re", settled)
	cb := appendAndMove(ctx, t, c, b, "logs/re", 6) // 0-5, then the seal: 6
	// 0-5, the seal at 6.
	want := tagged("old", 0, 6, 6)
	_, err := cb.Append(ctx, "logs/re", recs(3, "b1"), client.AppendOptions{}) // 7-9
	must(t, err)
	for i := range 3 {
		want[uint64(7+i)] = fmt.Sprintf("b1-%d", i)
	}
	mst := metastore.Stream{ID: st.ID, Name: "logs/re", Class: metastore.Express, Star: "star-1", From: "star-0"}
	settleOneChain(ctx, t, meta, a, settled, mst, "star-1", 9)
	b.ts.Close()
	b.star.Close()
	b2 := newNodeOn(t, meta, "star-1", nil, map[string]string{"star-0": a.ts.URL}, nil, b.std, b.exp, settled)
	a.peers["star-1"] = b2.ts.URL
	c2 := newClient(t, b2, adminTok)
	ack, err := c2.Append(ctx, "logs/re", recs(1, "b2"), client.AppendOptions{})
	must(t, err)
	if ack.StartSeq != 10 {
		t.Fatalf("star-1's successor appended at %d, want 10 (after the refs' 9; star-0's window part ends at 6)", ack.StartSeq)
	}
	want[10] = "b2-0"
	checkMovedReads(ctx, t, "after the successor's append", []*client.Client{c2, c}, "logs/re", want)
}

// TestReview3LostAckAcrossMoveAndTakeovers (ADR 0062 carried tables
// against ADR 0065, attack): a producer's batch is acknowledged on star-0
// and its ack lost; the stream moves to star-1, which writes more than
// 16 parts of other producers' batches (past what a recovery reads
// without a carried table), and star-1 is then taken over by a successor
// twice. The producer's resend to the last successor is answered with
// the original ack and writes nothing: star-1 carried the table it
// recovered from star-0's parts, and each successor recovered it.
func TestReview3LostAckAcrossMoveAndTakeovers(t *testing.T) {
	for _, mode := range []string{"refs", "pass-index"} {
		t.Run(mode, func(t *testing.T) {
			var settled []objstore.Bucket
			if mode == "pass-index" {
				settled = append(settled, objstore.NewMem("settled"))
			}
			lostAckAcrossTakeovers(t, settled)
		})
	}
}

func lostAckAcrossTakeovers(t *testing.T, settled []objstore.Bucket) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	meta, a, b, c, st := moveOne(t, "logs/lt", settled...)
	p := client.NewProducerID()
	opt := client.AppendOptions{Producer: &p, BatchSeq: 0}
	orig, err := c.Append(ctx, "logs/lt", recs(3, "p"), opt) // 0-2; its ack "lost"
	must(t, err)
	cb := appendAndMove(ctx, t, c, b, "logs/lt", 1)
	mst := metastore.Stream{ID: st.ID, Name: "logs/lt", Class: metastore.Express, Star: "star-1", From: "star-0"}
	var win *passindex.Window
	if len(settled) > 0 {
		win = &passindex.Window{Meta: meta, Bucket: settled[0]}
	}
	parts := func() int { // star-1's parts of the stream, refs or window
		if win != nil {
			one := mst
			one.From = ""
			ps, err := win.StreamParts(ctx, one, 0)
			must(t, err)
			return len(ps)
		}
		refs, err := meta.QueryRefs(ctx, st.ID, orig.EndSeq+2, 1000)
		must(t, err)
		return len(refs)
	}
	for k := 0; parts() <= 20; k++ {
		q := client.NewProducerID()
		_, err := cb.Append(ctx, "logs/lt", recs(1, fmt.Sprintf("q%d", k)), client.AppendOptions{Producer: &q})
		must(t, err)
		if k > 2000 {
			t.Fatalf("%d parts of star-1 after %d appends", parts(), k)
		}
		time.Sleep(2 * time.Millisecond) // a release event (10 ms) now and then: parts
	}
	cur := b
	for range 2 { // two takeovers of star-1
		cur.ts.Close()
		cur.star.Close()
		cur = newNodeOn(t, meta, "star-1", nil, map[string]string{"star-0": a.ts.URL}, nil, b.std, b.exp, settled...)
	}
	cs := newClient(t, cur, adminTok)
	again, err := cs.Append(ctx, "logs/lt", recs(3, "p"), opt)
	must(t, err)
	if again.StartSeq != orig.StartSeq || again.EndSeq != orig.EndSeq {
		t.Fatalf("the resend after the move and two takeovers was acknowledged at %d-%d, the original at %d-%d: written twice", again.StartSeq, again.EndSeq, orig.StartSeq, orig.EndSeq)
	}
	tail, err := cs.CheckTail(ctx, "logs/lt")
	must(t, err)
	res, err := cs.Read(ctx, "logs/lt", client.FromSeq(0), client.Limits{Count: 1000})
	must(t, err)
	if uint64(len(res.Records)) != tail.NextSeq {
		t.Fatalf("%d records read, tail %d", len(res.Records), tail.NextSeq)
	}
	n := 0
	for _, r := range res.Records {
		if string(r.Body) == "p-0" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the producer's batch is in the stream %d times", n)
	}
}

// TestReview3ZombieSealNeverMovesAgain (ADR 0065 against a standby
// takeover, attack): process p1 of star-0 seals a stream for star-1 and
// its leader write fails. A successor p2 of star-0 takes over, rolls the
// move forward, star-1 appends and moves the stream back to star-0 (p2),
// which appends. p1 still runs (a zombie that has not noticed it was
// deposed) and remembers its unfinished move. Neither a call for the
// stream reaching p1 nor an operator retrying the move there may write
// star-1 as the leader again: that write is conditioned on the metastore
// naming star-0, which it does again, but the seal it would finish is
// history. It would make star-1 open the stream at the same tail p2 is
// appending at: two leaders. The stream stays star-0's (p2's), whose next
// append lands after its last.
func TestReview3ZombieSealNeverMovesAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw := newMeta(t)
	meta := &failingMoves{Store: raw}
	std, exp := []objstore.Bucket{objstore.NewMem("std-0")}, []objstore.Bucket{objstore.NewMem("exp-0"), objstore.NewMem("exp-1"), objstore.NewMem("exp-2")}
	p1peers, bpeers := map[string]string{}, map[string]string{}
	p1 := newNodeOn(t, meta, "star-0", nil, p1peers, nil, std, exp)
	b := newNodeOn(t, raw, "star-1", nil, bpeers, nil, std, exp)
	p1peers["star-1"] = b.ts.URL
	c1 := newClient(t, p1, adminTok)
	_, err := c1.CreateStream(ctx, "logs/z", client.CreateOptions{Class: "express"})
	must(t, err)
	_, err = c1.Append(ctx, "logs/z", recs(3, "x"), client.AppendOptions{}) // 0-2
	must(t, err)
	meta.down.Store(true)
	mctx, mcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, _, err = c1.MoveStream(mctx, "logs/z", "star-1") // the seal: 3; the leader write fails
	mcancel()
	if err == nil {
		t.Fatal("the move succeeded with the metastore refusing its write")
	}
	meta.down.Store(false)
	p2 := newNodeOn(t, raw, "star-0", nil, map[string]string{"star-1": b.ts.URL}, nil, std, exp) // takes star-0 over
	bpeers["star-0"] = p2.ts.URL
	c2, cb := newClient(t, p2, adminTok), newClient(t, b, adminTok)
	_, err = c2.Append(ctx, "logs/z", recs(1, "y"), client.AppendOptions{}) // p2 rolls the move forward; star-1 appends: 4
	must(t, err)
	if _, _, err := cb.MoveStream(ctx, "logs/z", "star-0"); err != nil { // the seal back: 5
		t.Fatal(err)
	}
	ack, err := c2.Append(ctx, "logs/z", recs(1, "w"), client.AppendOptions{}) // p2: 6
	must(t, err)
	if ack.StartSeq != 6 {
		t.Fatalf("p2's append after the move back at %d, want 6", ack.StartSeq)
	}
	// The zombie: an operator's retry, then a call for the stream, each
	// from a client of p1's own (a client follows a redirect, and p2 may
	// move the stream at an operator's word).
	zctx, zcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, _, err = newClient(t, p1, adminTok).MoveStream(zctx, "logs/z", "star-1")
	t.Logf("the operator's retry on p1: %v", err)
	_, _ = newClient(t, p1, adminTok).Append(zctx, "logs/z", recs(1, "z"), client.AppendOptions{})
	zcancel()
	st, err := raw.GetStream(ctx, "logs/z")
	must(t, err)
	if st.Star != "star-0" {
		t.Fatalf("after the zombie's calls the stream is led by %s (from %s), while p2 leads it: two leaders", st.Star, st.From)
	}
	tail, err := c2.CheckTail(ctx, "logs/z")
	must(t, err)
	ack, err = c2.Append(ctx, "logs/z", recs(1, "v"), client.AppendOptions{})
	must(t, err)
	if ack.StartSeq != tail.NextSeq {
		t.Fatalf("p2's next append at %d, want its tail %d", ack.StartSeq, tail.NextSeq)
	}
}

// TestReview3RefsSettleAfterMoveBack (ADR 0065 against settle, attack,
// refs mode): a stream moved star-0 -> star-1 -> star-0 (in refs mode a
// move back does not wait for settle), star-1 at a later epoch than
// star-0 (two takeovers). star-0's chain then holds the stream's parts
// from two periods, with star-1's seqs between them, and a settle step of
// star-0's chain spans them all. Settle of each chain must settle its own
// parts only and make progress: before, star-0's step took star-1's refs
// for its own, compared their slots (epoch 3) with its checkpoint (epoch
// 1) and failed at every step ("ref points past the checkpoint"), stuck
// for good; the move simulation's settle check found it (seed 81). Both
// chains' settle then covers the stream once, every ref settled.
func TestReview3RefsSettleAfterMoveBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	meta, a, b, c, st := moveOne(t, "logs/rb")
	for range 2 { // star-1 at epoch 3
		b.ts.Close()
		b.star.Close()
		b = newNodeOn(t, meta, "star-1", nil, map[string]string{"star-0": a.ts.URL}, nil, a.std, a.exp)
		a.peers["star-1"] = b.ts.URL
	}
	cb := appendAndMove(ctx, t, c, b, "logs/rb", 3)                             // 0-2, the seal: 3
	_, err := cb.Append(ctx, "logs/rb", recs(2, "mid"), client.AppendOptions{}) // 4-5
	must(t, err)
	if _, _, err := cb.MoveStream(ctx, "logs/rb", "star-0"); err != nil { // the seal: 6
		t.Fatal(err)
	}
	_, err = c.Append(ctx, "logs/rb", recs(2, "new"), client.AppendOptions{}) // 7-8
	must(t, err)
	settler := &settle.Settler{Meta: meta, Settled: objstore.NewMem("settled-objects"), Log: slog.New(slog.DiscardHandler),
		Sets: absorb.Sets{Standard: chain.Set{Buckets: a.std, W: 1}, Express: chain.Set{Buckets: a.exp, W: 2}}}
	settledAll := func() bool {
		refs, err := meta.QueryRefs(ctx, st.ID, 0, 100)
		must(t, err)
		for _, r := range refs {
			for _, l := range r.Locations {
				if !l.Settled {
					return false
				}
			}
		}
		return len(refs) > 0 && refs[len(refs)-1].LastSeq == 8
	}
	for attempt := 0; !settledAll(); attempt++ {
		for _, id := range []string{"star-0", "star-1"} {
			if _, err := settler.Run(ctx, metastore.ChainID{Star: id, Class: metastore.Express}); err != nil {
				t.Fatalf("settle of %s: %v", id, err)
			}
		}
		if attempt > 200 {
			t.Fatal("the stream's refs never all settled")
		}
		time.Sleep(10 * time.Millisecond) // absorb runs in the background
	}
	// (This harness's readers read no settled objects in refs mode: the
	// refs, each settled once, cover the stream without gap or overlap.)
	refs, err := meta.QueryRefs(ctx, st.ID, 0, 100)
	must(t, err)
	next := uint64(0)
	for _, r := range refs {
		if r.FirstSeq != next {
			t.Fatalf("settled refs %v: a ref at %d, want %d", refs, r.FirstSeq, next)
		}
		next = r.LastSeq + 1
	}
	if next != 9 {
		t.Fatalf("settled refs end at %d, want 9", next)
	}
}
