package kafka_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandlog/strand/shared/kafka"
)

// TestIdempotentRetryDeduped: an idempotent batch sent again (a producer's
// retry) is answered with its first base offset and not written again,
// also by a node restarted on the same stores (a takeover); the next
// sequence appends; a sequence that skips ahead is refused
// OUT_OF_ORDER_SEQUENCE_NUMBER.
func TestIdempotentRetryDeduped(t *testing.T) {
	s := newStores()
	n := s.start(t, true)
	addr := n.KafkaAddr()
	createTopic(t, addr, "idem", 1, nil)
	recs := kafka.EncodeRecords(kafka.SampleRecords())
	batch := func(seq int32) []byte { return kafka.RawBatch(0, 3, recs, 12345, seq) }
	end := func(addr string) int64 {
		p := fetchAt(t, newClient(t, addr), "idem", 0, 0)
		return p.HighWatermark
	}
	cl := newClient(t, addr)
	for i := range 2 {
		if p := produceRaw(t, cl, "idem", batch(0)); p.ErrorCode != 0 || p.BaseOffset != 0 {
			t.Fatalf("send %d of batch 0: error %d, base %d; want 0, 0", i, p.ErrorCode, p.BaseOffset)
		}
	}
	if e := end(addr); e != 3 {
		t.Fatalf("end after a batch and its retry: %d, want 3", e)
	}
	n.Close()
	n = s.start(t, true)
	t.Cleanup(n.Close)
	addr = n.KafkaAddr()
	cl = newClient(t, addr)
	if p := produceRaw(t, cl, "idem", batch(0)); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("batch 0 again after the restart: error %d, base %d; want 0, 0", p.ErrorCode, p.BaseOffset)
	}
	if p := produceRaw(t, cl, "idem", batch(3)); p.ErrorCode != 0 || p.BaseOffset != 3 {
		t.Fatalf("batch 3: error %d, base %d; want 0, 3", p.ErrorCode, p.BaseOffset)
	}
	if p := produceRaw(t, cl, "idem", batch(10)); p.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("batch 10 after 3..5: error %d, want OUT_OF_ORDER_SEQUENCE_NUMBER", p.ErrorCode)
	}
	if e := end(addr); e != 6 {
		t.Fatalf("end: %d, want 6 (two batches written once each)", e)
	}
}
