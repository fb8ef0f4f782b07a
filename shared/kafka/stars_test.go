package kafka_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/shared/node"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/star"
	"github.com/strandlog/strand/tests/testproc"
)

// TestStarsAreBrokers: two stars over one metastore, each naming the
// other as a broker. Metadata from either names the star leading each
// partition's stream as its leader; a client bootstrapped at the star
// that leads nothing produces to and consumes from a topic led by the
// other (NOT_LEADER_FOR_PARTITION and Metadata route it); groups are
// coordinated by the star leading the offsets stream, whichever star
// FindCoordinator is asked.
func TestStarsAreBrokers(t *testing.T) {
	s := newStores()
	settled := s.settled
	ka, kb := testproc.FreeAddr(t), testproc.FreeAddr(t)
	start := func(id, kafkaAddr string) *node.Node {
		cfg := star.Defaults()
		cfg.StarID = id
		for i := range 3 {
			cfg.Express.Buckets = append(cfg.Express.Buckets, objstore.NewMem(fmt.Sprintf("%s-x%d", id, i)))
		}
		cfg.Standard.Buckets = []objstore.Bucket{objstore.NewMem(id + "-s0")}
		cfg.Standard.FlushDeadline = time.Millisecond
		n, err := node.Start(context.Background(), node.Config{Star: cfg, Meta: s.meta, Settled: settled, Addr: "127.0.0.1:0", NoAuth: true,
			Kafka: node.KafkaConfig{Addr: kafkaAddr, Brokers: map[string]string{"star-a": ka, "star-b": kb}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		return n
	}
	start("star-a", ka)
	start("star-b", kb)
	ctx := context.Background()
	// Topic and offsets stream made through star-a: star-a leads them.
	createTopic(t, ka, "routed", 2, nil)
	if _, err := kadm.NewClient(newClient(t, ka)).FetchOffsets(ctx, "early"); err != nil {
		t.Fatal(err) // a group request: the offsets stream exists, led by star-a
	}

	b := newClient(t, kb)
	md, err := kadm.NewClient(b).Metadata(ctx, "routed")
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 2 {
		t.Errorf("brokers: %+v, want the two stars", md.Brokers)
	}
	for _, p := range md.Topics["routed"].Partitions {
		if host := brokerAddr(md, p.Leader); host != ka {
			t.Errorf("partition %d: leader at %s, want star-a's %s", p.Partition, host, ka)
		}
	}
	if err := b.ProduceSync(ctx, &kgo.Record{Topic: "routed", Value: []byte("via b")}).FirstErr(); err != nil {
		t.Fatalf("produce bootstrapped at star-b: %v", err)
	}
	for _, br := range md.Brokers {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = "g"
		resp, err := b.Broker(int(br.NodeID)).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		fc := resp.(*kmsg.FindCoordinatorResponse)
		if fc.ErrorCode != 0 || fc.NodeID != md.Topics["routed"].Partitions[0].Leader {
			t.Errorf("FindCoordinator asked at %s:%d: error %d, node %d; want star-a's", br.Host, br.Port, fc.ErrorCode, fc.NodeID)
		}
	}
	got := consume(t, kb, "routed", 1, kgo.ConsumerGroup("via-b"))
	if string(got[0].Value) != "via b" {
		t.Errorf("consumed %q", got[0].Value)
	}
}

func brokerAddr(md kadm.Metadata, id int32) string {
	for _, b := range md.Brokers {
		if b.NodeID == id {
			return net.JoinHostPort(b.Host, fmt.Sprint(b.Port))
		}
	}
	return ""
}
