package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/metastore"
	assembly "github.com/strandlog/strand/shared/node"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
	"github.com/strandlog/strand/shared/read"
	"github.com/strandlog/strand/shared/server"
	"github.com/strandlog/strand/shared/star"
	"github.com/strandlog/strand/shared/trim"
	"github.com/strandlog/strand/shared/wake"
)

type node struct {
	star *star.Star
	srv  *server.Server
	ts   *httptest.Server
	abs  *absorb.Absorber
	// stopAbsorb stops the node's in-process absorb (idempotent).
	stopAbsorb func()
	std, exp   []objstore.Bucket
	settled    []objstore.Bucket // on the pass index: its settled bucket
	peers      map[string]string // its server's Peers (a test may add one before a call)
}

// tokens used by the tests.
var (
	adminTok  = tok(1)
	readTok   = tok(2) // read on "logs/"
	appendTok = tok(3) // append on "logs/"
)

func tok(b byte) string {
	t, err := auth.NewToken(bytes.NewReader(bytes.Repeat([]byte{b}, 32)))
	if err != nil {
		panic(err)
	}
	return t
}

// newNode starts a star with both classes on memory buckets, and its API
// server over HTTP (h2c).
func newNode(t testing.TB, meta metastore.Store, id string, withAuth bool, peers map[string]string) *node {
	t.Helper()
	var chk *auth.Checker
	if withAuth {
		chk = &auth.Checker{Meta: meta}
	}
	return newNodeWith(t, meta, id, chk, peers, nil)
}

// newNodeWith is newNode with a given checker (nil: no authentication) and
// logger (nil: discard).
func newNodeWith(t testing.TB, meta metastore.Store, id string, chk *auth.Checker, peers map[string]string, log *slog.Logger) *node {
	t.Helper()
	mk := func(prefix string, k int) []objstore.Bucket {
		var bs []objstore.Bucket
		for i := range k {
			bs = append(bs, objstore.NewMem(fmt.Sprintf("%s-%s-%d", id, prefix, i)))
		}
		return bs
	}
	return newNodeOn(t, meta, id, chk, peers, log, mk("std", 1), mk("exp", 3))
}

// newNodeOn is newNodeWith on given buckets (std: one, exp: three), which
// stars may share as they do in a deployment; with a settled bucket, on
// the pass index (the absorb indexes into it; reads, recovery and the
// server read the window).
func newNodeOn(t testing.TB, meta metastore.Store, id string, chk *auth.Checker, peers map[string]string, log *slog.Logger, std, exp []objstore.Bucket, settled ...objstore.Bucket) *node {
	t.Helper()
	cfg := star.Defaults()
	cfg.StarID = id
	cfg.ReleaseEventInterval = 10 * time.Millisecond
	cfg.Standard = star.ClassConfig{Buckets: std, W: 1, MemoryBufferMiB: 8, ParallelUploads: 8, FlushDeadline: time.Millisecond, FlightKiB: 64, CommitDeadline: 5 * time.Second}
	cfg.Express = star.ClassConfig{Buckets: exp, W: 2, MemoryBufferMiB: 8, ParallelUploads: 8, FlushDeadline: time.Millisecond, FlightKiB: 64, CommitDeadline: 5 * time.Second}
	abs := &absorb.Absorber{Meta: meta, Sets: assembly.Sets(cfg), Log: slog.New(slog.DiscardHandler)}
	var win *passindex.Window
	if len(settled) > 0 {
		abs.Index = settled[0]
		win = &passindex.Window{Meta: meta, Bucket: settled[0]}
	}
	local := wake.NewLocal(abs, nil, nil)
	st, err := star.New(cfg, meta, star.Options{Waker: local, Absorber: abs, NewFencer: func(id string, cc star.ClassConfig) star.Fencer {
		return chain.Set{Star: id, Buckets: cc.Buckets, W: cc.W}
	}})
	if err != nil {
		t.Fatal(err)
	}
	local.SetObserver(st)
	if err := st.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	actx, stopAbsorb := context.WithCancel(context.Background())
	absorbDone := make(chan struct{})
	go func() { defer close(absorbDone); local.Run(actx, 0) }()
	var once sync.Once
	stop := func() { once.Do(func() { stopAbsorb(); <-absorbDone }) }
	t.Cleanup(stop)
	rd := &read.Reader{Star: st, Meta: meta, Sets: map[metastore.Class]chain.Set{
		metastore.Standard: {Star: id, Buckets: std, W: 1}, metastore.Express: {Star: id, Buckets: exp, W: 2}}}
	if win != nil {
		rd.Transit, rd.Settled = win, settled[0]
	}
	sc := server.Config{Star: st, Meta: meta, Reader: rd, Peers: peers, Heartbeat: 50 * time.Millisecond, Auth: chk, Logger: log,
		DrainTimeout: time.Second, Window: win}
	srv, err := server.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.Config.Protocols = new(http.Protocols)
	ts.Config.Protocols.SetHTTP1(true)
	ts.Config.Protocols.SetUnencryptedHTTP2(true)
	ts.Start()
	t.Cleanup(ts.Close)
	return &node{star: st, srv: srv, ts: ts, abs: abs, stopAbsorb: stop, std: std, exp: exp, settled: settled, peers: peers}
}

func newMeta(t testing.TB) metastore.Store {
	meta := metastore.NewMem()
	ctx := context.Background()
	must(t, auth.Issue(ctx, meta, adminTok, "", []auth.Op{auth.Admin}))
	must(t, auth.Issue(ctx, meta, readTok, "logs/", []auth.Op{auth.Read}))
	must(t, auth.Issue(ctx, meta, appendTok, "logs/", []auth.Op{auth.Append}))
	return meta
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func newClient(t testing.TB, n *node, token string) *client.Client {
	t.Helper()
	c, err := client.New(n.ts.URL, client.WithToken(token))
	must(t, err)
	return c
}

func wantCode(t *testing.T, err error, code connect.Code) {
	t.Helper()
	if connect.CodeOf(err) != code {
		t.Fatalf("error %v: code %v, want %v", err, connect.CodeOf(err), code)
	}
}

func recs(n int, tag string) []client.Record {
	var out []client.Record
	for i := range n {
		out = append(out, client.Record{Body: fmt.Appendf(nil, "%s-%d", tag, i), Headers: []client.Header{{Name: []byte("k"), Value: []byte(tag)}}})
	}
	return out
}

func TestStreamsAppendReadCheckTail(t *testing.T) {
	ctx := context.Background()
	n := newNode(t, newMeta(t), "star-0", true, nil)
	c := newClient(t, n, adminTok)
	s, err := c.CreateStream(ctx, "logs/a", client.CreateOptions{Class: "express", RetentionMs: 60000})
	must(t, err)
	if s.Class != "express" || s.Leader != "star-0" || len(s.ID) != 32 || s.RetentionMs != 60000 {
		t.Fatalf("created %+v", s)
	}
	_, err = c.CreateStream(ctx, "logs/a", client.CreateOptions{})
	wantCode(t, err, connect.CodeAlreadyExists)
	_, err = c.CreateStream(ctx, "logs/b", client.CreateOptions{})
	must(t, err)
	_, err = c.CreateStream(ctx, "", client.CreateOptions{})
	wantCode(t, err, connect.CodeInvalidArgument)

	ack, err := c.Append(ctx, "logs/a", recs(10, "x"), client.AppendOptions{})
	must(t, err)
	if ack.StartSeq != 0 || ack.EndSeq != 10 || ack.NextSeq != 10 || ack.LastTsMs == 0 {
		t.Fatalf("ack %+v", ack)
	}
	ten := uint64(10)
	ack, err = c.Append(ctx, "logs/a", recs(5, "y"), client.AppendOptions{MatchSeq: &ten})
	must(t, err)
	if ack.StartSeq != 10 || ack.EndSeq != 15 {
		t.Fatalf("ack %+v", ack)
	}
	// A match_seq_num miss carries the tail and appends nothing.
	_, err = c.Append(ctx, "logs/a", recs(1, "z"), client.AppendOptions{MatchSeq: &ten})
	wantCode(t, err, connect.CodeFailedPrecondition)
	if tail, ok := client.SeqMismatch(err); !ok || tail.NextSeq != 15 {
		t.Fatalf("mismatch tail %+v %v", tail, ok)
	}
	// Bad input is InvalidArgument with the reason.
	_, err = c.Append(ctx, "logs/a", nil, client.AppendOptions{})
	wantCode(t, err, connect.CodeInvalidArgument)
	_, err = c.Append(ctx, "logs/a", []client.Record{{Headers: []client.Header{{Value: []byte("v")}}}}, client.AppendOptions{})
	wantCode(t, err, connect.CodeInvalidArgument)
	_, err = c.Append(ctx, "logs/a", recs(1001, "big"), client.AppendOptions{})
	wantCode(t, err, connect.CodeInvalidArgument)
	_, err = c.Append(ctx, "nope", recs(1, "x"), client.AppendOptions{})
	wantCode(t, err, connect.CodeNotFound)

	tail, err := c.CheckTail(ctx, "logs/a")
	must(t, err)
	if tail.NextSeq != 15 || tail.LastTsMs != ack.LastTsMs {
		t.Fatalf("tail %+v, ack %+v", tail, ack)
	}
	res, err := c.Read(ctx, "logs/a", client.FromSeq(8), client.Limits{Count: 4})
	must(t, err)
	if len(res.Records) != 4 || res.Records[0].Seq != 8 || string(res.Records[0].Body) != "x-8" || string(res.Records[2].Body) != "y-0" ||
		string(res.Records[2].Headers[0].Value) != "y" || res.NextSeq != 15 {
		t.Fatalf("read %+v", res)
	}
	res, err = c.Read(ctx, "logs/a", client.FromTail(2), client.Limits{})
	must(t, err)
	if len(res.Records) != 2 || res.Records[0].Seq != 13 {
		t.Fatalf("tail read %+v", res)
	}
	res, err = c.Read(ctx, "logs/a", client.FromSeq(100), client.Limits{})
	must(t, err)
	if len(res.Records) != 0 || res.NextSeq != 15 {
		t.Fatalf("read past the tail %+v", res)
	}
	_, err = c.Read(ctx, "logs/a", client.FromSeq(0), client.Limits{Count: 5000})
	wantCode(t, err, connect.CodeInvalidArgument)

	page, next, err := c.ListStreams(ctx, "logs/", "", 1)
	must(t, err)
	if len(page) != 1 || page[0].Name != "logs/a" || next == "" {
		t.Fatalf("page %+v next %q", page, next)
	}
	page, _, err = c.ListStreams(ctx, "logs/", next, 10)
	must(t, err)
	if len(page) != 1 || page[0].Name != "logs/b" {
		t.Fatalf("page 2 %+v", page)
	}
	got, err := c.GetStream(ctx, "logs/b")
	must(t, err)
	if got.Class != "standard" {
		t.Fatalf("get %+v", got)
	}

	must(t, c.DeleteStream(ctx, "logs/b"))
	_, err = c.Append(ctx, "logs/b", recs(1, "x"), client.AppendOptions{})
	wantCode(t, err, connect.CodeNotFound)
	// The name is free at once: a new stream (TestRecreateAtOnce).
	again, err := c.CreateStream(ctx, "logs/b", client.CreateOptions{})
	must(t, err)
	if again.ID == got.ID {
		t.Fatalf("recreated logs/b has the deleted stream's id %s", got.ID)
	}
}

func TestAppendSessionPipelinesInOrder(t *testing.T) {
	ctx := context.Background()
	n := newNode(t, newMeta(t), "star-0", true, nil)
	c := newClient(t, n, adminTok)
	_, err := c.CreateStream(ctx, "s", client.CreateOptions{Class: "express"})
	must(t, err)
	sess, err := c.OpenAppendSession(ctx, "s")
	must(t, err)
	defer sess.Close()
	const batches = 200
	go func() {
		for i := range batches {
			if err := sess.Submit(recs(5, fmt.Sprint(i)), client.AppendOptions{}); err != nil {
				return
			}
		}
		// This batch misses: it ends the session after the acks before it.
		zero := uint64(0)
		_ = sess.Submit(recs(1, "late"), client.AppendOptions{MatchSeq: &zero})
		_ = sess.Submit(recs(1, "never"), client.AppendOptions{})
	}()
	next := uint64(0)
	var final error
	for a := range sess.Acks() {
		if a.Err != nil {
			final = a.Err
			break
		}
		if a.StartSeq != next || a.EndSeq != next+5 {
			t.Fatalf("ack %+v, want start %d", a, next)
		}
		next = a.EndSeq
	}
	if next != batches*5 {
		t.Fatalf("acked up to %d, want %d", next, batches*5)
	}
	wantCode(t, final, connect.CodeFailedPrecondition)
	tail, err := c.CheckTail(ctx, "s")
	must(t, err)
	if tail.NextSeq != batches*5 {
		t.Fatalf("tail %d: the failed batch or one after it was appended", tail.NextSeq)
	}
}

func TestReadSessionTails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := newNode(t, newMeta(t), "star-0", true, nil)
	c := newClient(t, n, adminTok)
	_, err := c.CreateStream(ctx, "s", client.CreateOptions{})
	must(t, err)
	_, err = c.Append(ctx, "s", recs(3, "old"), client.AppendOptions{})
	must(t, err)
	rs, err := c.OpenReadSession(ctx, "s", client.FromSeq(1), client.SessionOptions{Heartbeat: 100 * time.Millisecond})
	must(t, err)
	defer rs.Close()
	var got []client.Record
	beats := 0
	for len(got) < 12 {
		if !rs.Next() {
			t.Fatalf("session ended: %v", rs.Err())
		}
		b := rs.Batch()
		if b.Heartbeat {
			beats++
			if beats == 1 {
				go func() { _, _ = c.Append(ctx, "s", recs(10, "new"), client.AppendOptions{}) }()
			}
		}
		got = append(got, b.Records...)
	}
	for i, r := range got {
		if r.Seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d", i, r.Seq)
		}
	}
	if beats == 0 || string(got[11].Body) != "new-9" {
		t.Fatalf("beats %d last %q", beats, got[11].Body)
	}
}

func TestAuthChangesNothingWithoutAValidToken(t *testing.T) {
	ctx := context.Background()
	n := newNode(t, newMeta(t), "star-0", true, nil)
	admin := newClient(t, n, adminTok)
	_, err := admin.CreateStream(ctx, "logs/a", client.CreateOptions{})
	must(t, err)
	_, err = admin.CreateStream(ctx, "other", client.CreateOptions{})
	must(t, err)

	for _, token := range []string{"", "strand_nope", tok(9)} {
		c := newClient(t, n, token)
		_, err := c.CreateStream(ctx, "logs/x", client.CreateOptions{})
		wantCode(t, err, connect.CodeUnauthenticated)
		_, err = c.Append(ctx, "logs/a", recs(1, "x"), client.AppendOptions{})
		wantCode(t, err, connect.CodeUnauthenticated)
		_, err = c.OpenReadSession(ctx, "logs/a", client.FromSeq(0), client.SessionOptions{})
		wantCode(t, err, connect.CodeUnauthenticated)
	}
	reader, appender := newClient(t, n, readTok), newClient(t, n, appendTok)
	// Wrong op.
	_, err = reader.Append(ctx, "logs/a", recs(1, "x"), client.AppendOptions{})
	wantCode(t, err, connect.CodePermissionDenied)
	_, err = appender.Read(ctx, "logs/a", client.FromSeq(0), client.Limits{})
	wantCode(t, err, connect.CodePermissionDenied)
	_, err = appender.CreateStream(ctx, "logs/new", client.CreateOptions{})
	wantCode(t, err, connect.CodePermissionDenied)
	err = reader.DeleteStream(ctx, "logs/a")
	wantCode(t, err, connect.CodePermissionDenied)
	// Wrong prefix.
	_, err = appender.Append(ctx, "other", recs(1, "x"), client.AppendOptions{})
	wantCode(t, err, connect.CodePermissionDenied)
	_, err = reader.Read(ctx, "other", client.FromSeq(0), client.Limits{})
	wantCode(t, err, connect.CodePermissionDenied)
	// Nothing changed.
	for _, name := range []string{"logs/a", "other"} {
		tail, err := admin.CheckTail(ctx, name)
		must(t, err)
		if tail.NextSeq != 0 {
			t.Fatalf("%s has %d records", name, tail.NextSeq)
		}
	}
	if _, err := admin.GetStream(ctx, "logs/x"); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("logs/x: %v", err)
	}
	if _, err := admin.GetStream(ctx, "logs/new"); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("logs/new: %v", err)
	}
	// Allowed: append within the prefix (and check the tail), read within it;
	// listing shows only the prefix.
	_, err = appender.Append(ctx, "logs/a", recs(2, "ok"), client.AppendOptions{})
	must(t, err)
	if tail, err := appender.CheckTail(ctx, "logs/a"); err != nil || tail.NextSeq != 2 {
		t.Fatalf("tail %+v %v", tail, err)
	}
	res, err := reader.Read(ctx, "logs/a", client.FromSeq(0), client.Limits{})
	must(t, err)
	if len(res.Records) != 2 {
		t.Fatalf("read %d", len(res.Records))
	}
	all, _, err := reader.ListStreams(ctx, "", "", 100)
	must(t, err)
	if len(all) != 1 || all[0].Name != "logs/a" {
		t.Fatalf("listed %+v", all)
	}
}

func TestClientFollowsTheLeader(t *testing.T) {
	ctx := context.Background()
	meta := newMeta(t)
	a := newNode(t, meta, "star-0", true, nil)
	peers := map[string]string{"star-0": a.ts.URL}
	b := newNode(t, meta, "star-1", true, peers)
	ca := newClient(t, a, adminTok)
	_, err := ca.CreateStream(ctx, "led-by-a", client.CreateOptions{})
	must(t, err)
	// Star-1 does not lead it: it says where the leader is.
	cb := newClient(t, b, adminTok)
	ack, err := cb.Append(ctx, "led-by-a", recs(3, "r"), client.AppendOptions{})
	must(t, err)
	if ack.EndSeq != 3 {
		t.Fatalf("ack %+v", ack)
	}
	res, err := cb.Read(ctx, "led-by-a", client.FromSeq(0), client.Limits{})
	must(t, err)
	if len(res.Records) != 3 {
		t.Fatalf("read %d", len(res.Records))
	}
	rs, err := cb.OpenReadSession(ctx, "led-by-a", client.FromSeq(0), client.SessionOptions{NoTail: true})
	must(t, err)
	n := 0
	for rs.Next() {
		n += len(rs.Batch().Records)
	}
	if rs.Err() != nil || n != 3 {
		t.Fatalf("session read %d, %v", n, rs.Err())
	}
	// A star that does not know the leader's URL still names it.
	// One attempt: the client would retry the unfollowable answer for its
	// whole budget (60 s), which this test does not check.
	bNoPeers := newNode(t, meta, "star-2", true, nil)
	once, err := client.New(bNoPeers.ts.URL, client.WithToken(adminTok), client.WithRetry(client.Retry{MaxAttempts: 1}))
	must(t, err)
	_, err = once.Append(ctx, "led-by-a", recs(1, "x"), client.AppendOptions{})
	wantCode(t, err, connect.CodeUnavailable)
	if l, ok := client.LeaderOf(err); !ok || l.Star != "star-0" || l.URL != "" {
		t.Fatalf("leader %+v %v", l, ok)
	}
}

// A stream deleted while its last appends are acknowledged but not yet
// absorbed is drained first: DeleteStream waits for the absorb, so every
// ref of the stream is written before it is marked deleting, and trim
// leaves no ref behind.
func TestDeleteStreamDrainsItsLastAppends(t *testing.T) {
	ctx := context.Background()
	meta := newMeta(t)
	n := newNode(t, meta, "star-0", true, nil)
	n.stopAbsorb() // the test absorbs by hand
	c := newClient(t, n, adminTok)
	s, err := c.CreateStream(ctx, "logs/d", client.CreateOptions{Class: "express"})
	must(t, err)
	for i := range 2 {
		a, err := c.Append(ctx, "logs/d", recs(2, fmt.Sprint(i)), client.AppendOptions{})
		must(t, err)
		if a.StartSeq != uint64(2*i) {
			t.Fatalf("append %d: %+v", i, a)
		}
	}
	done := make(chan error, 1)
	go func() { done <- c.DeleteStream(ctx, "logs/d") }()
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("DeleteStream returned %v before the stream's appends were absorbed", err)
	default:
	}
	if st, err := meta.GetStream(ctx, "logs/d"); err != nil || st.State != metastore.StreamActive {
		t.Fatalf("stream %+v %v: marked deleting before its appends were absorbed", st, err)
	}
	_, err = c.Append(ctx, "logs/d", recs(1, "late"), client.AppendOptions{})
	wantCode(t, err, connect.CodeNotFound)

	ch := metastore.ChainID{Star: "star-0", Class: metastore.Express}
	at, err := n.abs.Run(ctx, ch, n.star.Released(ch))
	must(t, err)
	n.star.Absorbed(ch, at)
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("DeleteStream did not return once the stream was absorbed")
	}
	if _, err := meta.GetStream(ctx, "logs/d"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("stream %v: want its name free", err)
	}
	if gone, _, err := meta.ListDeleting(ctx, "", 10); err != nil || len(gone) != 1 || gone[0].ID != s.ID {
		t.Fatalf("deleting streams %+v %v, want %s", gone, err, s.ID)
	}
	last, err := meta.LastRef(ctx, s.ID)
	if err != nil || last.LastSeq != 3 {
		t.Fatalf("last ref %+v %v: want every acknowledged record in refs (last seq 3)", last, err)
	}
	tr := &trim.Trimmer{Meta: meta}
	res, err := tr.Streams(ctx)
	must(t, err)
	if res.Deleted != 1 {
		t.Fatalf("trim %+v: want the stream deleted", res)
	}
	if refs, err := meta.QueryRefs(ctx, s.ID, 0, 10); err != nil || len(refs) != 0 {
		t.Fatalf("refs %+v %v left after the stream was deleted", refs, err)
	}
	// Nothing of it is left for the absorb to write later.
	at2, err := n.abs.Run(ctx, ch, n.star.Released(ch))
	must(t, err)
	if at2 != at {
		t.Fatalf("checkpoint moved %v -> %v with nothing appended", at, at2)
	}
	if refs, err := meta.QueryRefs(ctx, s.ID, 0, 10); err != nil || len(refs) != 0 {
		t.Fatalf("orphan refs %+v %v", refs, err)
	}
}

// When the absorb cannot catch up within the drain timeout, DeleteStream
// fails with Unavailable and changes nothing: the stream takes appends at
// the same tail.
func TestDeleteStreamGivesUpWhenTheAbsorbIsDown(t *testing.T) {
	ctx := context.Background()
	meta := newMeta(t)
	n := newNode(t, meta, "star-0", true, nil)
	n.stopAbsorb()
	c := newClient(t, n, adminTok)
	_, err := c.CreateStream(ctx, "logs/e", client.CreateOptions{Class: "standard"})
	must(t, err)
	_, err = c.Append(ctx, "logs/e", recs(3, "a"), client.AppendOptions{})
	must(t, err)
	err = c.DeleteStream(ctx, "logs/e")
	wantCode(t, err, connect.CodeUnavailable)
	if !strings.Contains(err.Error(), "nothing was deleted") {
		t.Fatalf("error %q does not say that nothing was deleted", err)
	}
	if st, err := meta.GetStream(ctx, "logs/e"); err != nil || st.State != metastore.StreamActive {
		t.Fatalf("stream %+v %v after a failed delete", st, err)
	}
	a, err := c.Append(ctx, "logs/e", recs(1, "b"), client.AppendOptions{})
	must(t, err)
	if a.StartSeq != 3 {
		t.Fatalf("append after a failed delete: %+v, want first seq 3", a)
	}
}

// TestConcurrentDeleteStreamIsDistinct (issue 31): two DeleteStreams of one
// stream at once: one drains (here it gives up, Unavailable: the absorb is
// down), the other is refused FailedPrecondition with
// server.ErrDeleteInProgress's message, not Aborted, which the error table
// keeps for an append whose outcome is unknown (and client.Retriable
// retries).
func TestConcurrentDeleteStreamIsDistinct(t *testing.T) {
	ctx := context.Background()
	meta := newMeta(t)
	n := newNode(t, meta, "star-0", true, nil)
	n.stopAbsorb()
	c := newClient(t, n, adminTok)
	_, err := c.CreateStream(ctx, "logs/d", client.CreateOptions{Class: "standard"})
	must(t, err)
	_, err = c.Append(ctx, "logs/d", recs(1, "a"), client.AppendOptions{})
	must(t, err)
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- c.DeleteStream(ctx, "logs/d") }()
	}
	got := map[connect.Code]error{}
	for range 2 {
		err := <-errs
		got[connect.CodeOf(err)] = err
	}
	if got[connect.CodeUnavailable] == nil || got[connect.CodeFailedPrecondition] == nil {
		t.Fatalf("two DeleteStreams at once: %v, want one unavailable (drain gave up) and one failed_precondition", got)
	}
	if err := got[connect.CodeFailedPrecondition]; !strings.Contains(err.Error(), server.ErrDeleteInProgress.Error()) || client.Retriable(err) {
		t.Errorf("the refused DeleteStream: %v (retriable %v), want %q and not retriable", err, client.Retriable(err), server.ErrDeleteInProgress)
	}
}
