package server_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/metacount"
)

// seedStreams creates n streams named logs/<index> in meta, bypassing the
// API (the listing is under test, not creation).
func seedStreams(tb testing.TB, meta metastore.Store, n int) {
	tb.Helper()
	ctx := context.Background()
	for i := range n {
		s := metastore.Stream{Name: fmt.Sprintf("logs/%07d", i), ID: fmt.Sprintf("%032x", i+1), Class: metastore.Express, Star: "star-0", State: metastore.StreamActive}
		if _, err := meta.CreateStream(ctx, s); err != nil {
			tb.Fatal(err)
		}
	}
}

// listAll pages through every stream under prefix, limit at a time, and
// returns the names and the number of pages; every page holds at most
// limit streams.
func listAll(tb testing.TB, c *client.Client, prefix string, limit int) ([]string, int) {
	tb.Helper()
	ctx := context.Background()
	var names []string
	after, pages := "", 0
	for {
		page, next, err := c.ListStreams(ctx, prefix, after, limit)
		must(tb, err)
		pages++
		if len(page) > limit {
			tb.Fatalf("page %d holds %d streams, limit %d", pages, len(page), limit)
		}
		for _, s := range page {
			names = append(names, s.Name)
		}
		if next == "" {
			return names, pages
		}
		after = next
	}
}

// ListStreams is paged at any catalogue size: at 30,000 streams, pages of
// 1000 list every stream once, in order, with a continuation token
// between pages and none after the last; a limit over 1000 is refused.
func TestListStreamsPagesEveryStream(t *testing.T) {
	const n = 30000
	meta := newMeta(t)
	seedStreams(t, meta, n)
	nd := newNode(t, meta, "star-0", true, nil)
	c := newClient(t, nd, adminTok)
	names, pages := listAll(t, c, "logs/", 1000)
	if len(names) != n || pages != n/1000 {
		t.Fatalf("%d streams in %d pages, want %d in %d", len(names), pages, n, n/1000)
	}
	for i, name := range names {
		if want := fmt.Sprintf("logs/%07d", i); name != want {
			t.Fatalf("stream %d listed as %q, want %q", i, name, want)
		}
	}
	_, _, err := c.ListStreams(context.Background(), "logs/", "", 1001)
	wantCode(t, err, connect.CodeInvalidArgument)
	page, next, err := c.ListStreams(context.Background(), "logs/", "", 0)
	must(t, err)
	if len(page) != 100 || next != "logs/0000099" {
		t.Fatalf("default page: %d streams, next %q", len(page), next)
	}
}

// BenchmarkListStreams lists a catalogue of a million streams through the
// API on loopback, 1000 a page (the largest page), and reports the time
// per page and for the whole listing, and the metastore read units a page
// would cost on DynamoDB. docs/performance/many-streams.md ("Many streams") reports it:
//
//	go test ./shared/server -run '^$' -bench ListStreams -benchtime 1x
func BenchmarkListStreams(b *testing.B) {
	const n = 1000000
	mc := metacount.New(newMeta(b))
	seedStreams(b, mc.Unwrap(), n)
	nd := newNode(b, mc, "star-0", true, nil)
	c := newClient(b, nd, adminTok)
	b.ResetTimer()
	for range b.N {
		before := mc.Snapshot()
		start := time.Now()
		names, pages := listAll(b, c, "logs/", 1000)
		took := time.Since(start)
		if len(names) != n {
			b.Fatalf("listed %d of %d streams", len(names), n)
		}
		d := mc.Snapshot().Sub(before)
		b.ReportMetric(took.Seconds(), "s/listing")
		b.ReportMetric(float64(took.Milliseconds())/float64(pages), "ms/page")
		b.ReportMetric(float64(d.RRU)/float64(pages), "RRU/page")
	}
}

// BenchmarkCreateStream creates streams through the API on loopback from
// 8 clients at once, and reports creates per second and what one costs on
// DynamoDB (item writes, WRU).
//
//	go test ./shared/server -run '^$' -bench CreateStream -benchtime 20000x
func BenchmarkCreateStream(b *testing.B) {
	mc := metacount.New(newMeta(b))
	nd := newNode(b, mc, "star-0", true, nil)
	c := newClient(b, nd, adminTok)
	var next atomic.Int64
	before := mc.Snapshot()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				if _, err := c.CreateStream(context.Background(), fmt.Sprintf("logs/%09d", i), client.CreateOptions{Class: "express"}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	d := mc.Snapshot().Sub(before)
	b.ReportMetric(float64(b.N)/took.Seconds(), "creates/s")
	b.ReportMetric(float64(d.Items)/float64(b.N), "items/create")
	b.ReportMetric(float64(d.WRU)/float64(b.N), "WRU/create")
}
