package kafka_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/shared/kafka"
	"github.com/strandlog/strand/shared/node"
	"github.com/strandlog/strand/shared/star"
	"github.com/strandlog/strand/tests/testproc"
)

// twoBrokers is shared stores and two free Kafka addresses, for star-a
// and star-b; start runs a node of either star, with peers, its Kafka
// front end at its address and both as brokers.
func twoBrokers(t *testing.T) (s *stores, ka, kb string, start func(id string, peers map[string]string) *node.Node) {
	s = newStores()
	ka, kb = testproc.FreeAddr(t), testproc.FreeAddr(t)
	addr := map[string]string{"star-a": ka, "star-b": kb}
	return s, ka, kb, func(id string, peers map[string]string) *node.Node {
		cfg := star.Defaults()
		cfg.StarID = id
		cfg.Express.Buckets, cfg.Standard.Buckets = s.exp, s.std
		cfg.Standard.FlushDeadline = time.Millisecond
		n, err := node.Start(context.Background(), node.Config{Star: cfg, Meta: s.meta, Settled: s.settled, Addr: "127.0.0.1:0", NoAuth: true, Peers: peers,
			Kafka: node.KafkaConfig{Addr: addr[id], Brokers: addr}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		return n
	}
}

// TestStoppedStarNamesLeader (ADR 0074): star-a led a partition and
// stopped serving it (quiesced), and the metastore names star-b now (a
// takeover written since). A produce to star-a is answered
// NOT_LEADER_FOR_PARTITION, and star-a's Metadata names star-b as the
// partition's leader, so a producer finds it there. It failed before:
// REQUEST_TIMED_OUT, which producers retry on star-a without a metadata
// refresh, until their delivery timeout.
func TestStoppedStarNamesLeader(t *testing.T) {
	s, ka, kb, start := twoBrokers(t)
	na := start("star-a", nil)
	start("star-b", nil)
	createTopic(t, ka, "gone", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seed := newClient(t, ka).SeedBrokers()[0] // star-a's front end, whatever the metadata says
	produce := func() int16 {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "gone"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = kafka.RawBatch(0, 3, kafka.EncodeRecords(kafka.SampleRecords()), -1, -1)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := seed.Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	if code := produce(); code != 0 {
		t.Fatalf("the first produce: %v", kerr.ErrorForCode(code))
	}
	if err := na.Star.Quiesce(ctx); err != nil {
		t.Fatal(err)
	}
	name := kafka.PartitionStream("gone", 0)
	st, err := s.meta.GetStream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.meta.MoveStream(ctx, name, st.ID, "star-a", "star-b"); err != nil {
		t.Fatal(err)
	}
	if code := produce(); code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("a produce to the star that stopped serving the partition: %v, want NOT_LEADER_FOR_PARTITION", kerr.ErrorForCode(code))
	}
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("gone")
	mreq.Topics = append(mreq.Topics, mt)
	resp, err := seed.Request(ctx, mreq)
	if err != nil {
		t.Fatal(err)
	}
	md := resp.(*kmsg.MetadataResponse)
	leader := md.Topics[0].Partitions[0].Leader
	for _, b := range md.Brokers {
		if b.NodeID == leader {
			if got := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))); got != kb {
				t.Fatalf("star-a's metadata names %s as the partition's leader, want star-b at %s", got, kb)
			}
			return
		}
	}
	t.Fatalf("star-a's metadata names leader %d, not a broker it lists (%+v)", leader, md.Brokers)
}
