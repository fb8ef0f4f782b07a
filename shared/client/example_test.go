package client_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/read"
	"github.com/strandlog/strand/shared/server"
	"github.com/strandlog/strand/shared/star"
)

// startServer runs a star and its API on memory stores, without auth, and
// returns its URL (a real deployment: `strand dev`, or the star task).
func startServer() (url string, stop func()) { return startServerWith(nil) }

// startServerWith is startServer with the API handler wrapped by wrap (nil:
// as is); the retry tests wrap it to lose answers and drop connections.
func startServerWith(wrap func(http.Handler) http.Handler) (url string, stop func()) {
	st, meta, rd := memStar()
	srv, err := server.New(server.Config{Star: st, Meta: meta, Reader: rd, Heartbeat: 50 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	var h http.Handler = srv.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	ts := h2cServer(h)
	return ts.URL, func() { ts.Close(); st.Close() }
}

// memStar is a started star with one Standard memory bucket, its metastore
// and a reader.
func memStar() (*star.Star, metastore.Store, *read.Reader) {
	meta := metastore.NewMem()
	b := objstore.NewMem("standard-0")
	cfg := star.Defaults()
	cfg.Express = star.ClassConfig{}
	cfg.Standard.Buckets = []objstore.Bucket{b}
	cfg.Standard.FlushDeadline = time.Millisecond
	st, err := star.New(cfg, meta, star.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if err := st.Start(context.Background()); err != nil {
		log.Fatal(err)
	}
	rd := &read.Reader{Star: st, Meta: meta, Sets: map[metastore.Class]chain.Set{metastore.Standard: {Star: cfg.StarID, Buckets: []objstore.Bucket{b}, W: 1}}}
	return st, meta, rd
}

// h2cServer serves h over HTTP/1.1 and HTTP/2 without TLS, as the star does.
func h2cServer(h http.Handler) *httptest.Server {
	ts := httptest.NewUnstartedServer(h)
	ts.Config.Protocols = new(http.Protocols)
	ts.Config.Protocols.SetHTTP1(true)
	ts.Config.Protocols.SetUnencryptedHTTP2(true)
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.Start()
	return ts
}

func Example() {
	url, stop := startServer()
	defer stop()
	ctx := context.Background()

	c, err := client.New(url, client.WithToken("strand_..."))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.CreateStream(ctx, "orders", client.CreateOptions{Class: "standard"}); err != nil {
		log.Fatal(err)
	}
	ack, err := c.Append(ctx, "orders", []client.Record{
		{Body: []byte("apples")},
		{Body: []byte("pears"), Headers: []client.Header{{Name: []byte("kind"), Value: []byte("fruit")}}},
	}, client.AppendOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("acked seqs %d..%d\n", ack.StartSeq, ack.EndSeq-1)

	res, err := c.Read(ctx, "orders", client.FromSeq(0), client.Limits{Count: 10})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range res.Records {
		fmt.Printf("%d %s\n", r.Seq, r.Body)
	}
	fmt.Println("tail", res.NextSeq)
	// Output:
	// acked seqs 0..1
	// 0 apples
	// 1 pears
	// tail 2
}

func ExampleSeqMismatch() {
	url, stop := startServer()
	defer stop()
	ctx := context.Background()
	c, _ := client.New(url)
	_, _ = c.CreateStream(ctx, "ledger", client.CreateOptions{})
	_, _ = c.Append(ctx, "ledger", []client.Record{{Body: []byte("a")}}, client.AppendOptions{})

	// Append only if the stream's tail is still 0: it is 1, so the batch is
	// rejected and the error carries the tail.
	zero := uint64(0)
	_, err := c.Append(ctx, "ledger", []client.Record{{Body: []byte("b")}}, client.AppendOptions{MatchSeq: &zero})
	if tail, ok := client.SeqMismatch(err); ok {
		fmt.Println("tail is", tail.NextSeq)
	}
	// Output:
	// tail is 1
}

func ExampleClient_OpenAppendSession() {
	url, stop := startServer()
	defer stop()
	ctx := context.Background()
	c, _ := client.New(url)
	_, _ = c.CreateStream(ctx, "metrics", client.CreateOptions{})

	sess, err := c.OpenAppendSession(ctx, "metrics")
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close()
	go func() {
		for i := range 3 {
			_ = sess.Submit([]client.Record{{Body: fmt.Appendf(nil, "batch %d", i)}}, client.AppendOptions{})
		}
		_ = sess.CloseSend()
	}()
	for a := range sess.Acks() { // in submission order
		if a.Err != nil {
			log.Fatal(a.Err)
		}
		fmt.Println("acked", a.StartSeq)
	}
	// Output:
	// acked 0
	// acked 1
	// acked 2
}

func ExampleClient_OpenReadSession() {
	url, stop := startServer()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _ := client.New(url)
	_, _ = c.CreateStream(ctx, "events", client.CreateOptions{})
	_, _ = c.Append(ctx, "events", []client.Record{{Body: []byte("old")}}, client.AppendOptions{})

	// Read from seq 0, then tail: records appended later arrive as they are
	// acknowledged. Count ends the session after two records.
	rs, err := c.OpenReadSession(ctx, "events", client.FromSeq(0), client.SessionOptions{Count: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer rs.Close()
	go func() {
		time.Sleep(100 * time.Millisecond)
		_, _ = c.Append(ctx, "events", []client.Record{{Body: []byte("new")}}, client.AppendOptions{})
	}()
	for rs.Next() {
		for _, r := range rs.Batch().Records {
			fmt.Println(r.Seq, string(r.Body))
		}
	}
	if err := rs.Err(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// 0 old
	// 1 new
}

// The recommended way to append: a ProducerSession. Append returns at once
// with a Future per batch (up to ProducerWindow batches in flight); each
// batch is written exactly once, across restarts and reconnects. Nothing
// must be read for the session to go on: wait on the futures you care
// about, or on Flush.
func ExampleProducerSession_Append() {
	url, stop := startServer()
	defer stop()
	ctx := context.Background()
	c, _ := client.New(url)
	_, _ = c.CreateStream(ctx, "orders", client.CreateOptions{})

	p, err := c.OpenProducerSession(ctx, "orders", client.ProducerOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	var futures []*client.Future
	for i := range 3 {
		f, err := p.Append([]client.Record{{Body: fmt.Appendf(nil, "order %d", i)}})
		if err != nil {
			log.Fatal(err) // the session failed
		}
		futures = append(futures, f)
	}
	if err := p.Flush(ctx); err != nil { // every batch durable
		log.Fatal(err)
	}
	for _, f := range futures {
		ack, _ := f.Wait(ctx)
		fmt.Println("durable at seq", ack.StartSeq)
	}
	// Output:
	// durable at seq 0
	// durable at seq 1
	// durable at seq 2
}

// The recommended way to read: Records, a Go iterator. NoTail stops at the
// tail; without it the loop follows new records until ctx ends or it
// breaks.
func ExampleClient_Records() {
	url, stop := startServer()
	defer stop()
	ctx := context.Background()
	c, _ := client.New(url)
	_, _ = c.CreateStream(ctx, "events", client.CreateOptions{})
	_, _ = c.Append(ctx, "events", []client.Record{{Body: []byte("a")}, {Body: []byte("b")}}, client.AppendOptions{})

	for r, err := range c.Records(ctx, "events", client.FromSeq(0), client.SessionOptions{NoTail: true}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(r.Seq, string(r.Body))
	}
	// Output:
	// 0 a
	// 1 b
}
