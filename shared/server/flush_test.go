package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/api/strandv1/strandv1connect"
	"github.com/strandlog/strand/shared/client"
)

// flushCounter counts the flushes of append sessions' responses that reach
// the HTTP server.
type flushCounter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w flushCounter) Flush() {
	w.n.Add(1)
	w.ResponseWriter.(http.Flusher).Flush()
}

func (w flushCounter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestAppendSessionCoalescesAckFlushes: a producer that pipelines
// one-record appends through one session gets every ack, in order, in
// fewer HTTP/2 flushes than acks (acks a flight releases together go out
// in one write), and a lone append after the burst is acknowledged at once
// (its ack is not held for one to come). Before the send loop coalesced,
// every ack was a flush of its own.
func TestAppendSessionCoalescesAckFlushes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := newNode(t, newMeta(t), "star-0", true, nil)
	var flushes atomic.Int64
	h := n.srv.Handler()
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == strandv1connect.StrandServiceAppendSessionProcedure {
			w = flushCounter{w, &flushes}
		}
		h.ServeHTTP(w, r)
	}))
	ts.Config.Protocols = new(http.Protocols)
	ts.Config.Protocols.SetHTTP1(true)
	ts.Config.Protocols.SetUnencryptedHTTP2(true)
	ts.Start()
	t.Cleanup(ts.Close)
	c, err := client.New(ts.URL, client.WithToken(adminTok))
	must(t, err)
	_, err = c.CreateStream(ctx, "s", client.CreateOptions{Class: "express"})
	must(t, err)
	sess, err := c.OpenAppendSession(ctx, "s")
	must(t, err)
	defer sess.Close()

	const batches = 1000
	go func() {
		for range batches {
			if err := sess.Submit(recs(1, "r"), client.AppendOptions{}); err != nil {
				return
			}
		}
	}()
	next := uint64(0)
	for next < batches {
		select {
		case a := <-sess.Acks():
			if a.Err != nil || a.StartSeq != next || a.EndSeq != next+1 {
				t.Fatalf("ack %+v, want [%d, %d)", a, next, next+1)
			}
			next = a.EndSeq
		case <-ctx.Done():
			t.Fatalf("%d of %d acks before the deadline", next, batches)
		}
	}
	got := flushes.Load()
	t.Logf("%d acks in %d flushes", batches, got)
	if got >= batches {
		t.Errorf("%d acks took %d flushes: none coalesced", batches, got)
	}

	// A lone append: its ack comes though nothing follows it.
	must(t, sess.Submit(recs(1, "last"), client.AppendOptions{}))
	select {
	case a := <-sess.Acks():
		if a.Err != nil || a.StartSeq != batches {
			t.Fatalf("lone ack %+v, want start %d", a, batches)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the lone append's ack was held back")
	}
}
