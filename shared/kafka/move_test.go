package kafka_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/kafka"
)

// TestMovedPartitionFollowsItsLeader: two stars on shared bucket sets,
// each a broker. An idempotent franz-go producer appends to a partition
// led by star-a while the partition's stream moves to star-b
// (MoveStream, ADR 0065): the refused batches are answered with a
// retriable NOT_LEADER_OR_FOLLOWER, the client finds the partition on
// star-b from Metadata, and every record lands once, in order.
func TestMovedPartitionFollowsItsLeader(t *testing.T) {
	_, ka, kb, start := twoBrokers(t)
	peers := map[string]map[string]string{"star-a": {}, "star-b": {}}
	na, nb := start("star-a", peers["star-a"]), start("star-b", peers["star-b"])
	peers["star-a"]["star-b"], peers["star-b"]["star-a"] = nb.Endpoint(), na.Endpoint()
	createTopic(t, ka, "moving", 1, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := newClient(t, ka, kgo.DefaultProduceTopic("moving"))
	const n = 60
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		if i == n/3 {
			sc, err := client.New(na.Endpoint())
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, _, err := sc.MoveStream(ctx, kafka.PartitionStream("moving", 0), "star-b"); err != nil {
					errs <- fmt.Errorf("move: %w", err)
				}
			}()
		}
		if err := p.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%02d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce r%02d across the move: %v", i, err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	md, err := kadm.NewClient(newClient(t, ka)).Metadata(ctx, "moving")
	if err != nil {
		t.Fatal(err)
	}
	if host := brokerAddr(md, md.Topics["moving"].Partitions[0].Leader); host != kb {
		t.Fatalf("partition 0's leader at %s after the move, want star-b's %s", host, kb)
	}
	got := consume(t, kb, "moving", n)
	if len(got) != n {
		t.Fatalf("consumed %d records, want %d", len(got), n)
	}
	for i, r := range got {
		if want := fmt.Sprintf("r%02d", i); string(r.Value) != want {
			t.Fatalf("record %d is %q, want %q (each once, in order)", i, r.Value, want)
		}
	}
}
