package kafka_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/shared/kafka"
	"github.com/strandlog/strand/shared/node"
)

// TestFetchCapped (ADR 0074): a Fetch asking for 100 MiB, of a partition
// holding 1.25 MiB, gets at most Limits.MaxFetchBytes (256 KiB here) and
// one record more: an answer is held in memory until the client reads
// it, so its size is the front end's, not the client's, to choose. It
// failed before: the whole 1.25 MiB came back.
func TestFetchCapped(t *testing.T) {
	s := newStores()
	const capBytes, value = 256 << 10, 32 << 10
	n := s.start(t, true, func(kc *node.KafkaConfig) { kc.Limits = kafka.Limits{MaxFetchBytes: capBytes} })
	t.Cleanup(n.Close)
	addr := n.KafkaAddr()
	createTopic(t, addr, "big", 1, nil)
	cl := newClient(t, addr, kgo.DefaultProduceTopic("big"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range 40 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: bytes.Repeat([]byte("v"), value)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	req := fetchReq("big", 0, 0, 0, 100<<20)
	req.MaxBytes = 100 << 20
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	got := len(resp.Topics[0].Partitions[0].RecordBatches)
	t.Logf("a fetch of 100 MiB from 40 records of %d bytes: %d bytes", value, got)
	if got == 0 || got > capBytes+value+4<<10 {
		t.Fatalf("a fetch asking 100 MiB got %d bytes; want at most the cap, %d, and one record", got, capBytes)
	}
}
