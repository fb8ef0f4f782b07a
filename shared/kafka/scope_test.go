package kafka_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/node"
)

// TestForeignProduceNotDecoded (authorize before spend): a Produce to a
// topic outside the token's scope is refused TOPIC_AUTHORIZATION_FAILED
// before its record set is decompressed or decoded: a record set that
// does not decode is answered so, not CORRUPT_MESSAGE, while the same
// bytes from a token that may append there are CORRUPT_MESSAGE. It
// failed before (CORRUPT_MESSAGE for both: the set was decoded first).
func TestForeignProduceNotDecoded(t *testing.T) {
	s := newStores()
	n := s.start(t, false, func(kc *node.KafkaConfig) { kc.AnonymousLoopback = false })
	t.Cleanup(n.Close)
	addr := n.KafkaAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin := saslClient(t, addr, issue(t, s, "", auth.Admin))
	if r, err := kadm.NewClient(admin).CreateTopic(ctx, 1, 1, nil, "team-a.orders"); err != nil || r.Err != nil {
		t.Fatalf("create the topic: %v %v", err, r.Err)
	}
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
