package kafka_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/node"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/star"
)

// stores are one strand's memory stores, kept across node restarts.
type stores struct {
	meta    metastore.Store
	exp     []objstore.Bucket
	std     []objstore.Bucket
	settled objstore.Bucket
}

func newStores() *stores {
	s := &stores{meta: metastore.NewMem(), std: []objstore.Bucket{objstore.NewMem("s0")}, settled: objstore.NewMem("settled")}
	for i := range 3 {
		s.exp = append(s.exp, objstore.NewMem(fmt.Sprintf("x%d", i)))
	}
	return s
}

// start runs a node with its Kafka front end on a free loopback port.
func (s *stores) start(t *testing.T, noAuth bool, kafka ...func(*node.KafkaConfig)) *node.Node {
	t.Helper()
	kc := node.KafkaConfig{Addr: "127.0.0.1:0", AnonymousLoopback: true, AutoCreateTopics: true}
	for _, f := range kafka {
		f(&kc)
	}
	cfg := star.Defaults()
	cfg.Express.Buckets, cfg.Standard.Buckets = s.exp, s.std
	cfg.Standard.FlushDeadline = time.Millisecond
	n, err := node.Start(context.Background(), node.Config{Star: cfg, Meta: s.meta, Settled: s.settled, Addr: "127.0.0.1:0", NoAuth: noAuth, Logger: testLogger(),
		Kafka: kc})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func startNode(t *testing.T) (*node.Node, *stores) {
	s := newStores()
	n := s.start(t, true)
	t.Cleanup(n.Close)
	return n, s
}

func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.MetadataMinAge(50 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t *testing.T, addr, topic string, parts int32, configs map[string]*string, opts ...kgo.Opt) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, addr, opts...))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, parts, 1, configs, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic %s: %v %v", topic, err, resp.Err)
	}
}

// consume reads n records of topic from the start.
func consume(t *testing.T, addr, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := newClient(t, addr, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records of %s before the deadline", len(got), n, topic)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		got = append(got, fs.Records()...)
	}
	return got
}

// testRecords have keys (null, empty, bytes), values (null, empty,
// bytes), headers (with a null value) and timestamps out of order.
func testRecords(topic string) []*kgo.Record {
	ts := time.UnixMilli(1_700_000_000_123)
	return []*kgo.Record{
		{Topic: topic, Key: []byte("k1"), Value: []byte("v1"), Timestamp: ts, Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x")}, {Key: "", Value: nil}}},
		{Topic: topic, Key: nil, Value: []byte{}, Timestamp: ts.Add(-time.Hour)},
		{Topic: topic, Key: []byte{}, Value: nil, Timestamp: ts.Add(time.Second), Headers: []kgo.RecordHeader{{Key: "\x00", Value: []byte{0, 1}}}},
		{Topic: topic, Key: bytes.Repeat([]byte{0xff}, 300), Value: bytes.Repeat([]byte("v"), 5000), Timestamp: ts},
	}
}

func sameRecord(t *testing.T, i int, got, want *kgo.Record) {
	t.Helper()
	if !bytes.Equal(got.Key, want.Key) || (got.Key == nil) != (want.Key == nil) {
		t.Errorf("record %d: key %q (nil %v), want %q (nil %v)", i, got.Key, got.Key == nil, want.Key, want.Key == nil)
	}
	if !bytes.Equal(got.Value, want.Value) || (got.Value == nil) != (want.Value == nil) {
		t.Errorf("record %d: value of %d bytes (nil %v), want %d (nil %v)", i, len(got.Value), got.Value == nil, len(want.Value), want.Value == nil)
	}
	if !got.Timestamp.Equal(want.Timestamp) {
		t.Errorf("record %d: timestamp %v, want %v", i, got.Timestamp.UnixMilli(), want.Timestamp.UnixMilli())
	}
	if len(got.Headers) != len(want.Headers) {
		t.Fatalf("record %d: headers %v, want %v", i, got.Headers, want.Headers)
	}
	for j := range want.Headers {
		g, w := got.Headers[j], want.Headers[j]
		if g.Key != w.Key || !bytes.Equal(g.Value, w.Value) || (g.Value == nil) != (w.Value == nil) {
			t.Errorf("record %d header %d: %q=%q (nil %v), want %q=%q (nil %v)", i, j, g.Key, g.Value, g.Value == nil, w.Key, w.Value, w.Value == nil)
		}
	}
}

// TestRoundTripEveryCodec produces the test records with each codec
// through kgo (idempotent, its default) and reads them back: key,
// headers, timestamp and value byte for byte, at the offsets the produce
// answered.
func TestRoundTripEveryCodec(t *testing.T) {
	n, _ := startNode(t)
	addr := n.KafkaAddr()
	for _, c := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{{"none", kgo.NoCompression()}, {"gzip", kgo.GzipCompression()}, {"snappy", kgo.SnappyCompression()}, {"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()}} {
		t.Run(c.name, func(t *testing.T) {
			topic := "rt-" + c.name
			createTopic(t, addr, topic, 1, nil)
			p := newClient(t, addr, kgo.ProducerBatchCompression(c.codec), kgo.ProducerLinger(50*time.Millisecond))
			want := testRecords(topic)
			res := p.ProduceSync(context.Background(), want...)
			if err := res.FirstErr(); err != nil {
				t.Fatal(err)
			}
			got := consume(t, addr, topic, len(want))
			if len(got) != len(want) {
				t.Fatalf("got %d records, want %d", len(got), len(want))
			}
			for i := range want {
				sameRecord(t, i, got[i], want[i])
				if got[i].Offset != res[i].Record.Offset {
					t.Errorf("record %d read at offset %d, produced at %d", i, got[i].Offset, res[i].Record.Offset)
				}
			}
		})
	}
}

func testLogger() *slog.Logger {
	if os.Getenv("KAFKA_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// TestLargeBatchOffsets: batches of more than strand's 1,000 records per
// append (written as several appends) from two producers at once to one
// partition: every record is read back at the offset its produce
// reported, so no batch was split by the other's.
func TestLargeBatchOffsets(t *testing.T) {
	n, _ := startNode(t)
	addr := n.KafkaAddr()
	createTopic(t, addr, "big", 1, nil)
	const each = 3000
	reported := map[string]int64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, who := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := newClient(t, addr, kgo.ProducerLinger(100*time.Millisecond), kgo.MaxBufferedRecords(2*each))
			var recs []*kgo.Record
			for i := range each {
				recs = append(recs, &kgo.Record{Topic: "big", Value: fmt.Appendf(nil, "%s-%d", who, i)})
			}
			res := p.ProduceSync(context.Background(), recs...)
			if err := res.FirstErr(); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			for _, r := range res {
				reported[string(r.Record.Value)] = r.Record.Offset
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	got := consume(t, addr, "big", 2*each)
	bad := 0
	for _, r := range got {
		if off, ok := reported[string(r.Value)]; !ok || off != r.Offset {
			bad++
		}
	}
	if bad != 0 || len(reported) != 2*each {
		t.Fatalf("%d of %d records read at another offset than their produce reported (%d reported)", bad, len(got), len(reported))
	}
}
