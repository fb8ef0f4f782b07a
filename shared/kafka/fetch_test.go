package kafka_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func fetchReq(topic string, off int64, minBytes, maxWaitMs, partMax int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = maxWaitMs, minBytes, 50<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = off, partMax
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// TestFetchLongPoll: a fetch with nothing to read waits up to its max
// wait and returns empty; one that is waiting returns as soon as a
// record arrives, well before its max wait.
func TestFetchLongPoll(t *testing.T) {
	n, _ := startNode(t)
	addr := n.KafkaAddr()
	createTopic(t, addr, "lp", 1, nil)
	cl := newClient(t, addr)
	ctx := context.Background()
	start := time.Now()
	resp, err := fetchReq("lp", 0, 1, 300, 1<<20).RequestWith(ctx, cl)
	if took := time.Since(start); err != nil || took < 250*time.Millisecond || len(resp.Topics[0].Partitions[0].RecordBatches) != 0 {
		t.Fatalf("an empty fetch with a 300 ms wait: %v after %s", err, took)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		newClient(t, addr).ProduceSync(ctx, &kgo.Record{Topic: "lp", Value: []byte("wake")})
	}()
	start = time.Now()
	resp, err = fetchReq("lp", 0, 1, 10_000, 1<<20).RequestWith(ctx, cl)
	took := time.Since(start)
	if err != nil || len(resp.Topics[0].Partitions[0].RecordBatches) == 0 || took > 5*time.Second {
		t.Fatalf("a waiting fetch: %v after %s with %d bytes; want the record soon after it is produced", err, took, len(resp.Topics[0].Partitions[0].RecordBatches))
	}
}

// TestFetchPartitionMaxBytes: a partition's max bytes bounds what one
// fetch returns, but at least one batch comes back however small it is.
func TestFetchPartitionMaxBytes(t *testing.T) {
	n, _ := startNode(t)
	addr := n.KafkaAddr()
	createTopic(t, addr, "mb", 1, nil)
	cl := newClient(t, addr)
	ctx := context.Background()
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "mb", Value: bytes.Repeat([]byte{byte(i)}, 1000)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	count := func(partMax int32) int {
		resp, err := fetchReq("mb", 0, 0, 0, partMax).RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		b := resp.Topics[0].Partitions[0].RecordBatches
		recs := 0
		for len(b) > 0 {
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(b); err != nil {
				t.Fatal(err)
			}
			recs += int(rb.NumRecords)
			b = b[12+rb.Length:]
		}
		return recs
	}
	if got := count(1 << 20); got != 20 {
		t.Errorf("1 MiB: %d records, want 20", got)
	}
	if got := count(5000); got < 1 || got > 6 {
		t.Errorf("5000 bytes: %d records, want 1 to 6", got)
	}
	if got := count(1); got < 1 {
		t.Errorf("1 byte: %d records, want at least one", got)
	}
}

// TestRequestBounds: a request larger than its key's bound, an unknown
// key, or a request before SASL when SASL is needed closes the
// connection without an answer; the body is not read.
func TestRequestBounds(t *testing.T) {
	n, _ := startNode(t)
	for _, tc := range []struct {
		name string
		size uint32
		key  uint16
	}{
		{"metadata over 1 MiB", 1<<20 + 1, 3},
		{"produce over 8 MiB", 8<<20 + 1, 0},
		{"unknown key", 20, 9999},
	} {
		c, err := net.Dial("tcp", n.KafkaAddr())
		if err != nil {
			t.Fatal(err)
		}
		frame := binary.BigEndian.AppendUint32(nil, tc.size)
		frame = binary.BigEndian.AppendUint16(frame, tc.key)
		frame = append(frame, make([]byte, 18)...) // version, correlation id, client id, some body
		c.Write(frame)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		// Closed with the request unread: an EOF or a reset.
		if b, err := io.ReadAll(c); err != nil && !errors.Is(err, syscall.ECONNRESET) || len(b) != 0 {
			t.Errorf("%s: read %d bytes, %v; want the connection closed without an answer", tc.name, len(b), err)
		}
		c.Close()
	}
	// The server still serves.
	if _, err := kadm.NewClient(newClient(t, n.KafkaAddr())).ListTopics(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestListGroups: a group with a live member lists as Stable; one that
// only committed offsets lists as Empty.
func TestListGroups(t *testing.T) {
	n, _ := startNode(t)
	addr := n.KafkaAddr()
	createTopic(t, addr, "lg", 1, nil)
	produceN(t, addr, "lg", 1, 1, "x")
	m := groupMember(t, addr, "live", "lg", nil)
	pollUntil(t, m, "the member's read", func(s map[string]int) bool { return len(s) == 1 }, map[string]int{})
	adm := kadm.NewClient(newClient(t, addr))
	var offs kadm.Offsets
	offs.AddOffset("lg", 0, 1, -1)
	if _, err := adm.CommitOffsets(context.Background(), "parked", offs); err != nil {
		t.Fatal(err)
	}
	groups, err := adm.ListGroups(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := groups["live"]; !ok || g.State != "Stable" {
		t.Errorf("live: %+v (listed %v), want Stable", g, ok)
	}
	if g, ok := groups["parked"]; !ok || g.State != "Empty" {
		t.Errorf("parked: %+v (listed %v), want Empty", g, ok)
	}
}

// TestMetrics: the front end's series are in the star's registry:
// connections, requests and their latency by API, refused connections.
func TestMetrics(t *testing.T) {
	n, _ := startNode(t)
	addr := n.KafkaAddr()
	createTopic(t, addr, "met", 1, nil)
	cl := newClient(t, addr)
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "met", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte{0, 0, 0, 8, 0x27, 0x0f, 0, 0, 0, 0, 0, 0}) // an unknown key
	io.ReadAll(c)
	c.Close()
	var b bytes.Buffer
	n.Star.Metrics().Write(&b)
	out := b.String()
	for _, want := range []string{`strand_kafka_requests_total{api="Produce"} 1`, `strand_kafka_request_seconds_count{api="Produce"} 1`,
		`strand_kafka_requests_total{api="CreateTopics"} 1`, "strand_kafka_refused_total 1", "strand_kafka_connections "} {
		if !strings.Contains(out, want) {
			t.Errorf("the registry has no %q:\n%s", want, grepLines(out, "strand_kafka_requests_total"))
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
