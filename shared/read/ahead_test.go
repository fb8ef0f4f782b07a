package read

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/metacount"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/settle"
	"github.com/strandlog/strand/shared/star"
	"github.com/strandlog/strand/shared/trim"
)

// sessionAll reads e's stream from 0 to the tail in one NoTail session
// and returns every record delivered; between batches it calls between
// (the settle and trim that run during the read).
func (e *env) sessionAll(between func(batch int)) []star.SeqRecord {
	e.t.Helper()
	var out []star.SeqRecord
	n := 0
	err := e.r.Session(context.Background(), e.st, Start{}, SessionOptions{NoTail: true}, func(b Batch) error {
		out = append(out, b.Records...)
		if between != nil {
			between(n)
		}
		n++
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if n < 2 {
		e.t.Fatalf("the session read in %d batches: the test wants several", n)
	}
	return out
}

func (e *env) settler() *settle.Settler {
	return &settle.Settler{Meta: e.meta, Sets: absorb.Sets{Express: e.set}, Settled: e.settled, MergeBelowBytes: 1 << 20, PassIndex: e.index != nil}
}

// counted swaps e's reader onto buckets that count GETs of the chain set
// and of the settled bucket, once every copy written so far has landed.
func (e *env) counted() (settledGets *countingGets, set []*countingGets) {
	// Every copy landed first (the last lands after the W-copy ack): a
	// GET of a copy not there yet asks the next zone, a GET more.
	waitCopies(e.t, e.set.Buckets, "chains/")
	var bs []objstore.Bucket
	for _, b := range e.set.Buckets {
		c := &countingGets{Bucket: b}
		set = append(set, c)
		bs = append(bs, c)
	}
	s := e.set
	s.Buckets = bs
	sg := &countingGets{Bucket: e.settled}
	e.r.Sets = map[metastore.Class]chain.Set{metastore.Express: s}
	e.r.Settled = sg
	return sg, set
}

// A session reads a backlog that lies in settled objects, then in transit
// slots, then in the star's index: every record once, in order (checked
// against the bodies the test appended, not against the store), and each
// location fetched about once: the read-ahead keeps the decoded segment
// across the session's batches instead of re-fetching it per batch.
func TestAheadAcrossSettledAndTransit(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.appendN(60, 50) // 3000 records: batches of 1000 start three times in the settled object
	e.absorb()
	if _, err := e.settler().Run(ctx, e.chain); err != nil {
		t.Fatal(err)
	}
	e.appendN(30, 50) // 1500 more, in transit
	e.absorb()
	e.appendN(2, 50) // and 100 in the index only
	refs, err := e.meta.QueryRefs(ctx, e.st.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	settled, transit := 0, 0
	for _, r := range refs {
		for _, l := range r.Locations {
			if l.Settled {
				settled++
			} else {
				transit++
			}
		}
	}
	if settled == 0 || transit == 0 {
		t.Fatalf("backlog: %d settled and %d transit locations: want both", settled, transit)
	}
	sg, set := e.counted()
	mc := metacount.New(e.meta)
	e.r.Meta = mc
	check(t, e.sessionAll(nil), 0, 4600)
	// One query per page of 8 refs (and one that finds the end), not one
	// per batch and page.
	if q, pages := mc.Snapshot().Of(metacount.QueryRefs), int64(len(refs)+7)/8; q > pages+1 {
		t.Fatalf("%d QueryRefs for %d refs (%d pages)", q, len(refs), pages)
	}
	chainGets := int64(0)
	for _, c := range set {
		chainGets += c.n.Load()
	}
	// Re-fetching per batch would be one GET per location per batch that
	// starts in it (three of the settled object, regression-checked); the
	// chain set's hedged reads may ask a second copy.
	t.Logf("settled GETs %d of %d locations; chain GETs %d of %d", sg.n.Load(), settled, chainGets, transit)
	if got := sg.n.Load(); got > int64(settled) {
		t.Fatalf("%d GETs of %d settled locations", got, settled)
	}
	if chainGets > int64(2*transit) {
		t.Fatalf("%d chain GETs of %d transit locations", chainGets, transit)
	}
}

// Settle (merging the last small settled object with the new data) and
// trim (deleting transit slots and replaced objects) run while a session
// reads: prefetched locations may vanish or be replaced under it. Every
// record still arrives once, in order, with the default budget and with
// one smaller than a location (every fetch waits for the one before).
//
// On the pass index, "flush" settles with every stream flushed at every
// step (a ref per step: the second merges the first's object); "runs"
// first settles into a run (packed, no ref), then the step during the
// read flushes the stream (its packed entry and the new passes into an
// object and a ref) and trim deletes the run and its pack under the read;
// "merged" is "runs" with every run merged at once (Fanout 1, design 014
// level 2): the read starts on a merged run, which the flush reads and
// trim deletes with its packs (and the level-1 run) under the read;
// "merging" settles into a run, then the step during the read writes a
// second run and merges both (Fanout 2, no flush) while the read is on
// the first, and trim deletes the chain slots under it.
func TestAheadWithSettleAndTrimDuringRead(t *testing.T) {
	for _, mode := range []string{"refs", "flush", "runs", "merged", "merging"} {
		for _, tc := range []struct{ trimAt, budget int }{{0, 0}, {1, 0}, {0, 2 << 10}, {1, 2 << 10}} {
			t.Run(fmt.Sprintf("%s/trim-after-batch-%d-budget-%d", mode, tc.trimAt, tc.budget), func(t *testing.T) {
				settleAndTrimDuringRead(t, mode, tc.trimAt, tc.budget, 1)
			})
		}
	}
}

// settleAndTrimDuringRead reads e's stream in readers concurrent
// sessions (one: sessionAll) while settle runs after the first session's
// batch 0 and trim after its batch trimAt, then checks every session got
// every record once, in order, and that trim deleted transit slots (and,
// in modes "runs" and "merged", the flushed run's packs) under the read.
func settleAndTrimDuringRead(t *testing.T, mode string, trimAt, budget, readers int) {
	indexed := mode != "refs"
	e := newEnvIndexed(t, indexed)
	if budget > 0 {
		e.r.AheadBudget = NewBudget(int64(budget))
	}
	ctx := context.Background()
	e.appendN(5, 50)
	e.absorb()
	first := e.settler()
	if mode == "flush" {
		first.FlushBytes = 1
	}
	switch mode {
	case "merged":
		first.Fanout = 1
	case "merging":
		first.Fanout = 2
	}
	if _, err := first.Run(ctx, e.chain); err != nil { // a small settled object (or a run): the next settle merges it (or flushes it)
		t.Fatal(err)
	}
	if mode == "runs" || mode == "merged" || mode == "merging" {
		if refs, err := e.meta.QueryRefs(ctx, e.st.ID, 0, 10); err != nil || len(refs) != 0 {
			t.Fatalf("refs after settling into a run: %d, %v", len(refs), err)
		}
	}
	if h, err := e.meta.GetHead(ctx, e.chain); err != nil || (mode == "merged") != (h.Merged == h.Settled) {
		t.Fatalf("mode %s: head %+v, %v", mode, h, err)
	}
	e.appendN(60, 50)
	e.absorb()
	before := e.transitKeys()
	tr := &trim.Trimmer{Meta: e.meta, Sets: absorb.Sets{Express: e.set}, Settled: e.settled, PassIndex: indexed}
	// between runs in a session's goroutine: t.Error, not t.Fatal.
	between := func(batch int) {
		if batch == 0 {
			s := e.settler()
			s.FlushBytes, s.FlushAge = 1, time.Nanosecond // flush everything
			switch mode {
			case "merged":
				s.Fanout = 1
			case "merging": // no flush: a second run, merged with the first
				s.FlushBytes, s.FlushAge, s.Fanout = 0, 0, 2
			}
			res, err := s.Step(ctx, e.chain)
			switch {
			case err != nil:
				t.Error(err)
			case mode == "merging" && (res.Merges != 1 || res.Flushes != 0):
				t.Errorf("settle during the read: %+v, want a merge and no flush", res)
			case (mode == "refs" || mode == "flush") && res.Merged == 0:
				t.Errorf("settle during the read merged nothing: %+v", res)
			case (mode == "runs" || mode == "merged") && (res.Flushes != 1 || res.Flushed != res.To):
				t.Errorf("settle during the read flushed nothing: %+v", res)
			}
		}
		if batch == trimAt {
			if _, err := tr.Run(ctx, e.chain); err != nil {
				t.Error(err)
			}
		}
	}
	var got [][]star.SeqRecord
	if readers == 1 {
		got = [][]star.SeqRecord{e.sessionAll(between)}
	} else {
		got = sessions(t, e, readers, between)
	}
	if after := e.transitKeys(); after >= before {
		t.Fatalf("trim deleted no transit slot during the read (%d keys before, %d after)", before, after)
	}
	if mode == "runs" || mode == "merged" {
		if keys, err := e.settled.List(ctx, "packs/"); err != nil || len(keys) != 0 {
			t.Fatalf("packs left after the flush and trim: %v, %v", keys, err)
		}
	}
	for i := range got {
		check(t, got[i], 0, 3250)
	}
}

// transitKeys counts the objects in e's transit buckets.
func (e *env) transitKeys() int {
	n := 0
	for _, m := range e.mems {
		n += len(m.Keys())
	}
	return n
}

// upcoming skips the locations that end before from, as refsOnce does.
func TestUpcomingLocations(t *testing.T) {
	refs := []metastore.Ref{
		{FirstSeq: 0, LastSeq: 9, Locations: []metastore.Location{{Key: "a", FirstSeq: 0}, {Key: "b", FirstSeq: 5}}},
		{FirstSeq: 10, LastSeq: 19, Locations: []metastore.Location{{Key: "c", Settled: true}}},
	}
	var keys []string
	for _, l := range upcoming(refs, 6) {
		keys = append(keys, l.Key)
	}
	if fmt.Sprint(keys) != "[b c]" {
		t.Fatalf("from 6: %v", keys)
	}
	if u := upcoming(refs, 20); len(u) != 0 {
		t.Fatalf("past the refs: %v", u)
	}
}

// A location that is gone for good (its slot deleted, no ref replacing
// it) fails the session, and the read-ahead stops fetching: a failed fetch
// must not re-launch itself (it once did, forever, spinning a core).
func TestAheadStopsAfterAFailedFetch(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.appendN(20, 50)
	e.absorb()
	refs, err := e.meta.QueryRefs(ctx, e.st.ID, 0, 10)
	if err != nil || len(refs) == 0 || len(refs[0].Locations) < 2 {
		t.Fatalf("refs %v %v", refs, err)
	}
	gone := refs[0].Locations[1].Key
	for _, m := range e.mems {
		_ = m.Delete(ctx, gone)
	}
	_, set := e.counted()
	gets := func() int64 {
		n := int64(0)
		for _, c := range set {
			n += c.n.Load()
		}
		return n
	}
	err = e.r.Session(ctx, e.st, Start{}, SessionOptions{NoTail: true}, func(Batch) error { return nil })
	if err == nil {
		t.Fatal("a session over a vanished location succeeded")
	}
	time.Sleep(50 * time.Millisecond) // fetches in flight at the end finish
	after := gets()
	time.Sleep(100 * time.Millisecond)
	if n := gets(); n != after {
		t.Fatalf("GETs went on after the session ended: %d, then %d", after, n)
	}
}
