package client_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/server"
)

// TestTailSessionResumesAfterDrain: a TailSession whose session is ended
// by a drain (unavailable, "draining for shutdown") reopens on the
// successor after the last record it delivered: every record arrives once,
// in seq order, and the end is reported to OnEnd.
func TestTailSessionResumesAfterDrain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, meta, rd := memStar()
	defer st.Close()
	// Two API servers over one star: the first drains, the second stands
	// for its successor behind the same address.
	var servers [2]*server.Server
	var err error
	for i := range servers {
		if servers[i], err = server.New(server.Config{Star: st, Meta: meta, Reader: rd, Heartbeat: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	var live atomic.Pointer[http.Handler]
	h0 := servers[0].Handler()
	live.Store(&h0)
	ts := h2cServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*live.Load()).ServeHTTP(w, r) }))
	defer ts.Close()
	hc := client.NewHTTPClient()
	defer hc.CloseIdleConnections()
	c, err := client.New(ts.URL, client.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStream(ctx, "t", client.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	appendN := func(from, n int) {
		for i := from; i < from+n; i++ {
			if _, err := c.Append(ctx, "t", []client.Record{{Body: []byte(fmt.Sprint(i))}}, client.AppendOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var ends []error
	ts2 := c.OpenTailSession(ctx, "t", client.FromSeq(0), client.TailOptions{OnEnd: func(err error) { ends = append(ends, err) }})
	defer ts2.Close()
	var next uint64
	read := func(upto uint64) {
		t.Helper()
		for next < upto {
			if !ts2.Next() {
				t.Fatalf("tail ended at %d: %v", next, ts2.Err())
			}
			for _, r := range ts2.Batch().Records {
				if r.Seq != next || string(r.Body) != fmt.Sprint(next) {
					t.Fatalf("record seq %d %q, want seq %d", r.Seq, r.Body, next)
				}
				next++
			}
		}
	}
	appendN(0, 5)
	read(5)
	servers[0].EndSessions()
	h1 := servers[1].Handler()
	live.Store(&h1)
	appendN(5, 5)
	read(10)
	if len(ends) != 1 || !client.Retriable(ends[0]) || !strings.Contains(ends[0].Error(), "draining for shutdown") {
		t.Fatalf("session ends %v, want one unavailable drain", ends)
	}
}
