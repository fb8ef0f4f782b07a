package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/star"
)

// TestCloseDrainsSessionsWithUnavailable: Close ends a tailing read
// session and an idle append session with unavailable and the leader hint
// (never a protocol error or a clean end), after an active append session
// has received the ack of every batch the star admitted; and Close
// returns. Regression test: it failed before the drain (Close waited out
// its 5 s shutdown timeout, the sessions stayed open until the process
// would exit, and the read session never ended).
func TestCloseDrainsSessionsWithUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	meta := metastore.NewMem()
	cfg := star.Defaults()
	cfg.Express = star.ClassConfig{}
	cfg.Standard.Buckets = []objstore.Bucket{objstore.NewMem("s0")}
	cfg.Standard.FlushDeadline = time.Millisecond
	// One settled bucket for both processes: it holds the pass indexes
	// the successor recovers the tails from.
	settled := objstore.NewMem("settled")
	n, err := Start(ctx, Config{Star: cfg, Meta: meta, Settled: settled, Addr: "127.0.0.1:0", NoAuth: true,
		Peers: map[string]string{"star-0": "http://star-0.example:4780"}})
	if err != nil {
		t.Fatal(err)
	}
	hc := client.NewHTTPClient()
	defer hc.CloseIdleConnections()
	c, err := client.New(n.Endpoint(), client.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"busy", "idle", "tail"} {
		if _, err := c.CreateStream(ctx, s, client.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := c.OpenReadSession(ctx, "tail", client.FromSeq(0), client.SessionOptions{Heartbeat: time.Hour, NoResume: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	if !rs.Next() { // the open's heartbeat
		t.Fatal(rs.Err())
	}
	idle, err := c.OpenAppendSession(ctx, "idle")
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	// A session's request reaches the server with its first batch.
	if err := idle.Submit([]client.Record{{Body: []byte("x")}}, client.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if a := <-idle.Acks(); a.Err != nil {
		t.Fatal(a.Err)
	}
	busy, err := c.OpenAppendSession(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	stopSending := make(chan struct{})
	sent := make(chan int, 1)
	go func() {
		i := 0
		defer func() { sent <- i }()
		for ; ; i++ {
			select {
			case <-stopSending:
				return
			default:
			}
			if busy.Submit([]client.Record{{Body: []byte(fmt.Sprint(i))}}, client.AppendOptions{}) != nil {
				return
			}
		}
	}()
	// Let the busy session get going, then close the node.
	first := <-busy.Acks()
	if first.Err != nil {
		t.Fatal(first.Err)
	}
	closed := make(chan struct{})
	go func() { n.Close(); close(closed) }()

	wantDrained := func(what string, err error) {
		t.Helper()
		if connect.CodeOf(err) != connect.CodeUnavailable {
			t.Fatalf("%s ended with %v (code %v), want unavailable", what, err, connect.CodeOf(err))
		}
		if l, ok := client.LeaderOf(err); !ok || l.Star != "star-0" || l.URL != "http://star-0.example:4780" {
			t.Fatalf("%s: leader hint %+v %v, want star-0 at its peer URL", what, l, ok)
		}
	}
	for rs.Next() {
	}
	wantDrained("read session", rs.Err())
	var idleErr error
	for a := range idle.Acks() {
		idleErr = a.Err
	}
	wantDrained("idle append session", idleErr)
	acked := uint64(first.EndSeq)
	var busyErr error
	for a := range busy.Acks() {
		if a.Err != nil {
			busyErr = a.Err
			continue
		}
		if a.StartSeq != acked {
			t.Fatalf("busy session: ack at %d, want %d", a.StartSeq, acked)
		}
		acked = a.EndSeq
	}
	if connect.CodeOf(busyErr) != connect.CodeUnavailable {
		t.Fatalf("busy append session ended with %v, want unavailable", busyErr)
	}
	close(stopSending)
	<-sent
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("Close did not return")
	}
	// Every acknowledged record survives the restart, and nothing past the
	// acks was half-written: the successor's tail is at or past the acks.
	n2, err := Start(ctx, Config{Star: cfg, Meta: meta, Settled: settled, Addr: "127.0.0.1:0", NoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	c2, err := client.New(n2.Endpoint(), client.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c2.Read(ctx, "busy", client.FromSeq(0), client.Limits{Count: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if res.NextSeq < acked {
		t.Fatalf("after restart the tail is %d, below the %d acknowledged records", res.NextSeq, acked)
	}
	for i, r := range res.Records {
		if r.Seq != uint64(i) || string(r.Body) != fmt.Sprint(i) {
			t.Fatalf("record %d: seq %d %q", i, r.Seq, r.Body)
		}
	}
}
