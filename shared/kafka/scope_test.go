package kafka_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/kafka"
	"github.com/strandlog/strand/shared/node"
)

// teamTopic starts a node with SASL required (loopback not trusted) and
// creates the topic team-a.orders as an admin.
func teamTopic(t *testing.T) (s *stores, addr string, admin *kgo.Client) {
	t.Helper()
	s = newStores()
	n := s.start(t, false, func(kc *node.KafkaConfig) { kc.AnonymousLoopback = false })
	t.Cleanup(n.Close)
	addr = n.KafkaAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin = saslClient(t, addr, issue(t, s, "", auth.Admin))
	if r, err := kadm.NewClient(admin).CreateTopic(ctx, 1, 1, nil, "team-a.orders"); err != nil || r.Err != nil {
		t.Fatalf("create the topic: %v %v", err, r.Err)
	}
	return s, addr, admin
}

// TestForeignProduceNotDecoded (authorize before spend): a Produce to a
// topic outside the token's scope is refused TOPIC_AUTHORIZATION_FAILED
// before its record set is decompressed or decoded: a record set that
// does not decode is answered so, not CORRUPT_MESSAGE, while the same
// bytes from a token that may append there are CORRUPT_MESSAGE. It
// failed before (CORRUPT_MESSAGE for both: the set was decoded first).
func TestForeignProduceNotDecoded(t *testing.T) {
	s, addr, _ := teamTopic(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	produce := func(token string) int16 {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "team-a.orders"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = bytes.Repeat([]byte{0xff}, 1<<16) // no record batch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, saslClient(t, addr, token))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if got := produce(issue(t, s, "team-b.", auth.Append)); got != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("a token scoped to team-b. produces to team-a.orders: %v, want TOPIC_AUTHORIZATION_FAILED before decoding", kerr.ErrorForCode(got))
	}
	if got := produce(issue(t, s, "team-a.", auth.Append)); got != kerr.CorruptMessage.Code {
		t.Errorf("a team-a. token produces an undecodable set: %v, want CORRUPT_MESSAGE", kerr.ErrorForCode(got))
	}
}

// TestProducerIDsPerPrincipal: Kafka producer ids are the client's to
// send, so a principal that sends another's producer id has a sequence
// state of its own: it cannot make the owner's next batch out of order.
// It failed before (the table was keyed by stream, id and epoch only:
// the owner's batch at sequence 10 was OUT_OF_ORDER_SEQUENCE_NUMBER
// behind the other principal's batch at 0).
func TestProducerIDsPerPrincipal(t *testing.T) {
	s, addr, _ := teamTopic(t)
	recs := kafka.EncodeRecords(kafka.SampleRecords())
	const pid = 777
	other := saslClient(t, addr, issue(t, s, "team-a.", auth.Append, auth.Read))
	if p := produceRaw(t, other, "team-a.orders", kafka.RawBatch(0, 3, recs, pid, 0)); p.ErrorCode != 0 {
		t.Fatalf("the other principal's batch: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	owner := saslClient(t, addr, issue(t, s, "team-a.", auth.Append, auth.Read))
	if p := produceRaw(t, owner, "team-a.orders", kafka.RawBatch(0, 3, recs, pid, 10)); p.ErrorCode != 0 || p.BaseOffset != 3 {
		t.Errorf("the owner's batch at sequence 10 after another principal's at 0 with its id: %v, base %d; want written at 3", kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
	}
	if p := produceRaw(t, other, "team-a.orders", kafka.RawBatch(0, 3, recs, pid, 10)); p.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Errorf("the other principal skipping ahead of its own sequence: %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", kerr.ErrorForCode(p.ErrorCode))
	}
}

// TestAppendOnlyTokenProduces: a token with the append operation only
// (Kafka's WRITE) produces, and a produce that is refused writes nothing.
// It failed before: the front end read the stream's timestamping with the
// client's token after submitting the appends, so an append-only token's
// records were written and the producer told TOPIC_AUTHORIZATION_FAILED
// (a retry wrote them again).
func TestAppendOnlyTokenProduces(t *testing.T) {
	s, addr, admin := teamTopic(t)
	recs := kafka.EncodeRecords(kafka.SampleRecords())
	writer := saslClient(t, addr, issue(t, s, "team-a.", auth.Append))
	if p := produceRaw(t, writer, "team-a.orders", kafka.RawBatch(0, 3, recs, -1, -1)); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Errorf("an append-only token's produce: %v, base %d; want written at 0", kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
	}
	reader := saslClient(t, addr, issue(t, s, "team-a.", auth.Read))
	if p := produceRaw(t, reader, "team-a.orders", kafka.RawBatch(0, 3, recs, -1, -1)); p.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("a read-only token's produce: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(p.ErrorCode))
	}
	if hw := fetchAt(t, admin, "team-a.orders", 0, 0).HighWatermark; hw != 3 {
		t.Errorf("the topic ends at %d after one produce written and one refused, want 3", hw)
	}
}
