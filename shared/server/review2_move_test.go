package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
	"github.com/strandlog/strand/shared/settle"
	"github.com/strandlog/strand/shared/trim"
)

// TestReview2TrimAfterMove (ADR 0065 against trim, attack): records
// star-0 wrote before a move, still in star-0's chain (refs) or its
// chain's window (pass index: nothing settles here), are read by star-1
// through the stream's From. A trim on star-1 after the move, below the
// move's seal and then above it, is honoured by both windows: a read from
// seq 0 starts at the trim point, and the records above it, old star's
// and new star's, are all there in order.
func TestReview2TrimAfterMove(t *testing.T) {
	t.Run("refs", func(t *testing.T) { trimAfterMove(t) })
	t.Run("pass-index", func(t *testing.T) { trimAfterMove(t, objstore.NewMem("settled")) })
}

func trimAfterMove(t *testing.T, settled ...objstore.Bucket) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, b, c, _ := moveOne(t, "logs/t", settled...)
	cb := appendAndMove(ctx, t, c, b, "logs/t", 6)                             // 0-5, then the seal: 6
	_, err := cb.Append(ctx, "logs/t", recs(2, "new"), client.AppendOptions{}) // 7-8
	must(t, err)
	for _, trim := range []uint64{4, 8} {
		tr, err := cb.Trim(ctx, "logs/t", trim, client.TrimOptions{})
		must(t, err)
		if tr.TrimSeq != trim {
			t.Fatalf("trim at %d: trim point %d", trim, tr.TrimSeq)
		}
		for _, rc := range []*client.Client{cb, c} { // c: star-0, sent on to star-1
			res, err := rc.Read(ctx, "logs/t", client.FromSeq(0), client.Limits{Count: 100})
			must(t, err)
			var got []string
			for _, r := range res.Records {
				got = append(got, fmt.Sprintf("%d:%s", r.Seq, r.Body))
			}
			if len(res.Records) == 0 || res.Records[0].Seq != trim {
				t.Fatalf("after a trim at %d, a read from 0 returned %v; want it to start at %d", trim, got, trim)
			}
			for i, r := range res.Records {
				if r.Seq != trim+uint64(i) {
					t.Fatalf("after a trim at %d, a read from 0 returned %v: not contiguous", trim, got)
				}
			}
			if want := tr.Seq + 1; res.NextSeq != want {
				t.Fatalf("after a trim at %d, the tail is %d, want %d", trim, res.NextSeq, want)
			}
		}
	}
}

// TestReview2MoveDeletedStream (attack): MoveStream on a stream deleted
// on its leader, before and after a move, is refused NotFound and
// creates nothing.
func TestReview2MoveDeletedStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	meta, _, b, c, _ := moveOne(t, "logs/d")
	_, err := c.Append(ctx, "logs/d", recs(2, "x"), client.AppendOptions{})
	must(t, err)
	must(t, c.DeleteStream(ctx, "logs/d"))
	_, _, err = c.MoveStream(ctx, "logs/d", "star-1")
	wantCode(t, err, connect.CodeNotFound)

	_, err = c.CreateStream(ctx, "logs/e", client.CreateOptions{Class: "express"})
	must(t, err)
	if _, _, err := c.MoveStream(ctx, "logs/e", "star-1"); err != nil {
		t.Fatal(err)
	}
	cb := newClient(t, b, adminTok)
	must(t, cb.DeleteStream(ctx, "logs/e"))
	for _, mc := range []*client.Client{c, cb} {
		_, _, err = mc.MoveStream(ctx, "logs/e", "star-0")
		wantCode(t, err, connect.CodeNotFound)
	}
	for _, name := range []string{"logs/d", "logs/e"} {
		if st, err := meta.GetStream(ctx, name); err == nil {
			t.Fatalf("%s after a refused move of the deleted stream: %+v", name, st)
		}
	}
}

// TestReview2MoveWhileDraining (attack): a move of a stream whose star
// has begun its drain (BeginDrain: appends refused, the star not yet
// quiesced). MoveStream is not among the calls the drain refuses, so the
// move runs: the stream ends led by star-1, which acknowledges the next
// append right after the seal, and star-0 acknowledges nothing more.
func TestReview2MoveWhileDraining(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	meta, a, b, c, _ := moveOne(t, "logs/w")
	_, err := c.Append(ctx, "logs/w", recs(3, "x"), client.AppendOptions{}) // 0-2
	must(t, err)
	a.srv.BeginDrain()
	_, _, err = c.MoveStream(ctx, "logs/w", "star-1") // the seal: 3
	if err != nil {
		t.Fatalf("a move from a draining star: %v", err)
	}
	st, err := meta.GetStream(ctx, "logs/w")
	must(t, err)
	if st.Star != "star-1" {
		t.Fatalf("after the move the stream is led by %q", st.Star)
	}
	ack, err := newClient(t, b, adminTok).Append(ctx, "logs/w", recs(1, "y"), client.AppendOptions{})
	must(t, err)
	if ack.StartSeq != 4 {
		t.Fatalf("the append after the move is at %d, want 4 (after the seal)", ack.StartSeq)
	}
}

// TestReview2MoveAfterQuiesce (attack): once the draining star has
// quiesced, a move of its stream is refused, unavailable (its successor
// will serve it), and nothing is written: the stream is still led by
// star-0, and unsealed (no seal record after its appends).
func TestReview2MoveAfterQuiesce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	meta, a, _, c, _ := moveOne(t, "logs/q")
	_, err := c.Append(ctx, "logs/q", recs(3, "x"), client.AppendOptions{})
	must(t, err)
	a.srv.BeginDrain()
	must(t, a.star.Quiesce(ctx))
	mctx, mcancel := context.WithTimeout(ctx, time.Second) // the client retries unavailable
	defer mcancel()
	_, _, err = c.MoveStream(mctx, "logs/q", "star-1")
	t.Logf("the move from the quiesced star: %v", err)
	if code := connect.CodeOf(err); code != connect.CodeUnavailable && code != connect.CodeDeadlineExceeded {
		t.Fatalf("a move from a quiesced star: %v, want unavailable", err)
	}
	st, err := meta.GetStream(ctx, "logs/q")
	must(t, err)
	if st.Star != "star-0" {
		t.Fatalf("after a refused move the stream is led by %q", st.Star)
	}
	// Reads are served during a drain: no seal record after the three.
	res, err := c.Read(ctx, "logs/q", client.FromSeq(0), client.Limits{Count: 10})
	must(t, err)
	if len(res.Records) != 3 || res.NextSeq != 3 {
		t.Fatalf("after a refused move: %d records, tail %d; want 3 and 3 (no seal)", len(res.Records), res.NextSeq)
	}
}

// TestReview2DeleteMovedBeforeFlush (ADR 0065 against delete, attack, pass
// index): star-0 wrote a stream's first parts into its chain's window,
// the stream moved to star-1 (nothing settled), star-1 deleted it. The
// name is free at once (a new id, empty), and trim does not delete the
// old id's metadata while star-0's window still holds its parts: the
// deleting record keeps From, and trim's window check reads the window
// of the star the stream left too. Had it deleted them, settle of
// star-0's chain would later turn those parts into refs of no stream,
// which nothing reclaims. Once settle of star-0's chain has flushed
// them, trim deletes the old id: no ref of it is left.
func TestReview2DeleteMovedBeforeFlush(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	settled := objstore.NewMem("settled")
	meta, a, b, c, old := moveOne(t, "logs/z", settled)
	cb := appendAndMove(ctx, t, c, b, "logs/z", 3)
	must(t, cb.DeleteStream(ctx, "logs/z"))
	again, err := cb.CreateStream(ctx, "logs/z", client.CreateOptions{Class: "express"})
	must(t, err)
	if again.ID == old.ID {
		t.Fatalf("recreated with the old id %s", old.ID)
	}
	gone, _, err := meta.ListDeleting(ctx, "", 10)
	must(t, err)
	if len(gone) != 1 || gone[0].ID != old.ID || gone[0].From != "star-0" {
		t.Fatalf("deleting streams %+v, want the old id %s with From star-0", gone, old.ID)
	}
	tr := &trim.Trimmer{Meta: meta, Settled: settled, PassIndex: true, Log: slog.New(slog.DiscardHandler)}
	res, err := tr.Streams(ctx)
	must(t, err)
	if res.Deleted != 0 || res.Waiting != 1 {
		t.Fatalf("trim with the old id's parts still in star-0's window: %+v, want it waiting, nothing deleted", res)
	}
	if gone, _, err := meta.ListDeleting(ctx, "", 10); err != nil || len(gone) != 1 {
		t.Fatalf("deleting streams after trim: %+v %v, want the old id still there", gone, err)
	}
	// Settle of star-0's chain flushes the old id's parts; trim then
	// reclaims every ref of it and its metadata.
	settleMoved(ctx, t, meta, a, settled, metastore.Stream{ID: old.ID, Name: "logs/z", Class: metastore.Express, Star: "star-0"}, 0)
	res, err = tr.Streams(ctx)
	must(t, err)
	if res.Deleted != 1 {
		t.Fatalf("trim once star-0 settled: %+v, want the old id deleted", res)
	}
	if refs, err := meta.QueryRefs(ctx, old.ID, 0, 10); err != nil || len(refs) != 0 {
		t.Fatalf("refs of the deleted moved stream left: %d %v", len(refs), err)
	}
	if gone, _, err := meta.ListDeleting(ctx, "", 10); err != nil || len(gone) != 0 {
		t.Fatalf("deleting streams left: %+v %v", gone, err)
	}
	// The recreated stream reads none of the old records.
	lead := map[string]*client.Client{"star-0": c, "star-1": cb}
	st, err := meta.GetStream(ctx, "logs/z")
	must(t, err)
	rd, err := lead[st.Star].Read(ctx, "logs/z", client.FromSeq(0), client.Limits{Count: 10})
	must(t, err)
	if len(rd.Records) != 0 || rd.NextSeq != 0 {
		t.Fatalf("the recreated stream reads %d records, tail %d; want none", len(rd.Records), rd.NextSeq)
	}
}

// TestReview2TrimReclaimsOldStarParts (ADR 0065 against trim, attack,
// pass index): a stream trimmed on star-1 at a seq above everything
// star-0 wrote before the move. Settle of star-0's chain still flushes
// the moved stream's parts into refs (the stream is led elsewhere), and
// trim then drops the refs wholly below the trim point, star-0's
// included; a read from 0 still starts at the trim point, with the
// records above it intact. settleMoved's settle never merges a small
// object with new data: merged, star-0's and star-1's parts become one
// ref 0-10 (seen), which trim may not drop, trim working by whole refs
// as for a stream that never moved.
func TestReview2TrimReclaimsOldStarParts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	settled := objstore.NewMem("settled")
	meta, a, b, c, st := moveOne(t, "logs/r", settled)
	cb := appendAndMove(ctx, t, c, b, "logs/r", 6)                             // 0-5, then the seal: 6
	_, err := cb.Append(ctx, "logs/r", recs(3, "new"), client.AppendOptions{}) // 7-9
	must(t, err)
	const trimAt = 8
	tr, err := cb.Trim(ctx, "logs/r", trimAt, client.TrimOptions{}) // 10
	must(t, err)
	// Absorb runs in the background: wait for the trim record too.
	settleMoved(ctx, t, meta, a, settled, metastore.Stream{ID: st.ID, Name: "logs/r", Class: metastore.Express, Star: "star-1", From: "star-0"}, tr.Seq)
	before, err := meta.QueryRefs(ctx, st.ID, 0, 100)
	must(t, err)
	if len(before) == 0 || before[0].FirstSeq != 0 {
		t.Fatalf("after settle the refs start at %+v, want star-0's first part at 0", before)
	}
	trimmer := &trim.Trimmer{Meta: meta, Settled: settled, PassIndex: true, Log: slog.New(slog.DiscardHandler)}
	res, err := trimmer.Streams(ctx)
	must(t, err)
	if res.RefsDropped == 0 {
		t.Fatalf("trim %+v dropped none of the %d refs, star-0's below the trim point", res, len(before))
	}
	refs, err := meta.QueryRefs(ctx, st.ID, 0, 100)
	must(t, err)
	for _, r := range refs {
		if r.LastSeq < trimAt {
			t.Fatalf("trim %+v left ref %d-%d below the trim point %d (refs before: %d, after: %d)", res, r.FirstSeq, r.LastSeq, trimAt, len(before), len(refs))
		}
	}
	rd, err := cb.Read(ctx, "logs/r", client.FromSeq(0), client.Limits{Count: 100})
	must(t, err)
	if len(rd.Records) == 0 || rd.Records[0].Seq != trimAt || rd.NextSeq != tr.Seq+1 {
		t.Fatalf("after trim and reclaim a read from 0: %d records from %v, tail %d; want from %d, tail %d", len(rd.Records), rd.Records, rd.NextSeq, trimAt, tr.Seq+1)
	}
	if got := string(rd.Records[0].Body); got != "new-1" {
		t.Fatalf("the record at %d reads %q, want new-1", trimAt, got)
	}
}

// settleMoved runs settle on both stars' Express chains (a's buckets),
// never merging a small settled object with new data (so that refs stay
// apart, as they do past the merge size), until no window holds a part of st and its refs reach seq upTo (absorb
// runs in the background).
func settleMoved(ctx context.Context, t *testing.T, meta metastore.Store, a *node, settled objstore.Bucket, st metastore.Stream, upTo uint64) {
	t.Helper()
	settler := &settle.Settler{Meta: meta, Settled: settled, PassIndex: true, FlushBytes: 1, FlushAge: time.Nanosecond, MergeBelowBytes: -1, Log: slog.New(slog.DiscardHandler),
		Sets: absorb.Sets{Standard: chain.Set{Buckets: a.std, W: 1}, Express: chain.Set{Buckets: a.exp, W: 2}}}
	win := &passindex.Window{Meta: meta, Bucket: settled}
	for attempt := 0; ; attempt++ {
		for _, id := range []string{"star-0", "star-1"} {
			_, err := settler.Run(ctx, metastore.ChainID{Star: id, Class: metastore.Express})
			must(t, err)
		}
		parts, err := win.StreamParts(ctx, st, 0)
		must(t, err)
		last, err := meta.LastRef(ctx, st.ID)
		if len(parts) == 0 && err == nil && last.LastSeq >= upTo {
			return
		}
		if attempt > 100 {
			t.Fatalf("%d parts of %s never left the windows (last ref %+v, %v)", len(parts), st.Name, last, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReview2RetentionAfterMove (ADR 0065 against retention, attack,
// pass index): a stream with a retention of 1 s whose first records star-0
// wrote before the move and settle settled, the rest star-1 wrote after
// it. An hour on, trim applies the retention to every settled ref but
// the last, star-0's included, and a read from 0 returns no record of a
// dropped ref: it starts at the first record still stored, contiguous up
// to the tail. (Settle merges a small last object with the new data, and
// makes one ref of what it settles in one run; retention never drops the
// last ref. So this settle never merges, and runs before and after
// star-1's appends: two refs at least.)
func TestReview2RetentionAfterMove(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	settled := objstore.NewMem("settled")
	meta, a, b, c, _ := moveOne(t, "logs/other", settled)
	st, err := c.CreateStream(ctx, "logs/ret", client.CreateOptions{Class: "express", RetentionMs: 1000})
	must(t, err)
	cb := appendAndMove(ctx, t, c, b, "logs/ret", 6) // 0-5, then the seal: 6
	settler := &settle.Settler{Meta: meta, Settled: settled, PassIndex: true, FlushBytes: 1, FlushAge: time.Nanosecond, MergeBelowBytes: -1, Log: slog.New(slog.DiscardHandler),
		Sets: absorb.Sets{Standard: chain.Set{Buckets: a.std, W: 1}, Express: chain.Set{Buckets: a.exp, W: 2}}}
	settleRefs := func(upTo uint64) []metastore.Ref {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			for _, id := range []string{"star-0", "star-1"} {
				_, err := settler.Run(ctx, metastore.ChainID{Star: id, Class: metastore.Express})
				must(t, err)
			}
			refs, err := meta.QueryRefs(ctx, st.ID, 0, 100)
			must(t, err)
			done := len(refs) > 0 && refs[len(refs)-1].LastSeq >= upTo
			for _, r := range refs {
				for _, l := range r.Locations {
					done = done && l.Settled
				}
			}
			if done {
				return refs
			}
			if time.Now().After(deadline) {
				t.Fatalf("refs %+v never settled up to seq %d", refs, upTo)
			}
		}
	}
	settleRefs(6)
	ack, err := cb.Append(ctx, "logs/ret", recs(3, "new"), client.AppendOptions{}) // 7-9
	must(t, err)
	before := settleRefs(ack.EndSeq - 1)
	trimmer := &trim.Trimmer{Meta: meta, Settled: settled, PassIndex: true, Log: slog.New(slog.DiscardHandler), Clock: clock.NewManual(time.Now().Add(time.Hour))}
	res, err := trimmer.Streams(ctx)
	must(t, err)
	after, err := meta.QueryRefs(ctx, st.ID, 0, 100)
	must(t, err)
	if len(before) < 2 || len(after) != 1 || res.RefsDropped != len(before)-1 {
		t.Fatalf("refs before %d, after %d, trim %+v: want at least 2 before (star-0's, star-1's), all but the last dropped", len(before), len(after), res)
	}
	t.Logf("refs %d before retention, %d after (left: %d-%d)", len(before), len(after), after[0].FirstSeq, after[0].LastSeq)
	rd, err := cb.Read(ctx, "logs/ret", client.FromSeq(0), client.Limits{Count: 100})
	must(t, err)
	if len(rd.Records) == 0 || rd.Records[0].Seq != after[0].FirstSeq {
		t.Fatalf("a read from 0 after retention returned %d records from %v; the ref left starts at %d", len(rd.Records), rd.Records, after[0].FirstSeq)
	}
	for i, r := range rd.Records {
		if r.Seq != rd.Records[0].Seq+uint64(i) {
			t.Fatalf("a read from 0 after retention is not contiguous: %v", rd.Records)
		}
	}
	if rd.NextSeq != ack.EndSeq {
		t.Fatalf("tail %d, want %d", rd.NextSeq, ack.EndSeq)
	}
}

// appendAndMove appends n records to name through c (star-0), moves it
// to star-1 and returns a client of star-1 (b).
func appendAndMove(ctx context.Context, t *testing.T, c *client.Client, b *node, name string, n int) *client.Client {
	t.Helper()
	_, err := c.Append(ctx, name, recs(n, "old"), client.AppendOptions{})
	must(t, err)
	if _, _, err := c.MoveStream(ctx, name, "star-1"); err != nil {
		t.Fatal(err)
	}
	return newClient(t, b, adminTok)
}
