package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/tests/testproc"
)

const (
	standbyKafkaRecords = 3000
	standbyKafkaParts   = 2
	standbyKafkaKillAt  = 1000 // acknowledged records before the SIGKILL
	standbyKafkaBatch   = 50
)

// TestStandbyKafkaThroughKill9: two `strand dev --standby` on one data
// directory and one Kafka address (each its own API address). The waiting
// standby says in its output that the Kafka port is the leader's. An
// idempotent Kafka producer (kgo) and a consumer, both given only the
// Kafka address, run while the leader is killed with SIGKILL: the standby
// takes over and serves Kafka on that same address (binding it once the
// dead leader's socket is released), the producer's retries and the
// consumer's fetches reach it with no configuration, every acknowledged
// record is in the topic exactly once, and the consumer reads on from
// where it was, each partition's offsets contiguous from 0.
func TestStandbyKafkaThroughKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := testproc.Build(t, "./cmd/strand")
	dataDir := filepath.Join(t.TempDir(), "data")
	addrs := [2]string{testproc.FreeAddr(t), testproc.FreeAddr(t)}
	kaddr := testproc.FreeAddr(t)
	leader := startStandby(t, bin, dataDir, addrs[0], "--kafka-addr", kaddr)
	select {
	case <-leader.serving:
	case <-time.After(startDeadline):
		t.Fatal("the first strand dev --standby did not lead an unused data directory")
	}
	standby := startStandby(t, bin, dataDir, addrs[1], "--kafka-addr", kaddr)
	if l := standby.said("waiting to lead"); !strings.Contains(l, "Kafka on "+kaddr) || !strings.Contains(l, "leader") {
		t.Errorf("the waiting standby said %q, want it to say the Kafka port %s is the leader's until it leads", l, kaddr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	newClient := func(more ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(kaddr), kgo.RecordDeliveryTimeout(time.Minute), kgo.RetryTimeout(time.Minute)}, more...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	adm := kadm.NewClient(newClient())
	if r, err := adm.CreateTopic(ctx, standbyKafkaParts, 1, nil, "sk9"); err != nil || r.Err != nil {
		t.Fatalf("create topic: %v %v", err, r.Err)
	}

	// The producer: "sk9-<n>" to partition n%parts, batch after batch,
	// each waited for; kgo retries through the takeover on its own.
	var mu sync.Mutex
	acked := 0
	var ackAt []time.Time
	prodErr := make(chan error, 1)
	go func() {
		p := newClient(kgo.RecordPartitioner(kgo.ManualPartitioner()))
		for n := 0; n < standbyKafkaRecords; n += standbyKafkaBatch {
			var recs []*kgo.Record
			for i := n; i < n+standbyKafkaBatch; i++ {
				recs = append(recs, &kgo.Record{Topic: "sk9", Partition: int32(i % standbyKafkaParts), Value: fmt.Appendf(nil, "sk9-%d", i)})
			}
			if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				prodErr <- fmt.Errorf("batch from %d: %w", n, err)
				return
			}
			mu.Lock()
			acked += len(recs)
			ackAt = append(ackAt, time.Now())
			mu.Unlock()
		}
		prodErr <- nil
	}()

	// The consumer: one client from the start of both partitions, through
	// the kill; each partition must read offsets 0, 1, 2... and the
	// records of that partition in the order they were produced.
	c := newClient(kgo.ConsumeTopics("sk9"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	next := map[int32]int64{}
	read := 0
	var bad []string
	poll := func(until func() bool) {
		for !until() {
			if ctx.Err() != nil {
				t.Fatalf("the consumer read %d records before the deadline", read)
			}
			pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
			fs := c.PollFetches(pctx)
			pcancel()
			fs.EachRecord(func(r *kgo.Record) {
				mu.Lock()
				defer mu.Unlock()
				want := fmt.Sprintf("sk9-%d", int(next[r.Partition])*standbyKafkaParts+int(r.Partition))
				if r.Offset != next[r.Partition] || string(r.Value) != want {
					bad = append(bad, fmt.Sprintf("sk9/%d offset %d %q, want offset %d %q", r.Partition, r.Offset, r.Value, next[r.Partition], want))
				}
				next[r.Partition] = r.Offset + 1
				read++
			})
		}
	}
	poll(func() bool {
		mu.Lock()
		defer mu.Unlock()
		return acked >= standbyKafkaKillAt && read >= standbyKafkaKillAt/2
	})

	mu.Lock()
	atKill, readAtKill := acked, read
	mu.Unlock()
	killAt := time.Now()
	leader.kill()
	select {
	case <-standby.serving:
	case <-time.After(startDeadline):
		t.Fatalf("the standby did not take over within %s", startDeadline)
	}
	if l := standby.said("Kafka clients"); !strings.Contains(l, kaddr) {
		t.Fatalf("the standby leads but says %q, want it to serve Kafka on %s", l, kaddr)
	}
	took := time.Duration(standby.servedAt.Load() - killAt.UnixNano())
	if atKill >= standbyKafkaRecords {
		t.Fatalf("the producer had finished (%d acknowledged) before the kill", atKill)
	}
	poll(func() bool { mu.Lock(); defer mu.Unlock(); return read >= standbyKafkaRecords })
	if err := <-prodErr; err != nil {
		t.Fatalf("the producer: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("the consumer read %d records out of place (lost, duplicated or rewound), first: %s", len(bad), bad[0])
	}
	if read != standbyKafkaRecords {
		t.Fatalf("the consumer read %d records, want %d", read, standbyKafkaRecords)
	}
	// The topic's end: nothing past what was produced (a duplicate would
	// be a record after the last).
	ends, err := adm.ListEndOffsets(ctx, "sk9")
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != standbyKafkaRecords {
		t.Fatalf("the topic ends at %d records in all, want %d (lost or duplicated)", total, standbyKafkaRecords)
	}
	var gap time.Duration
	for i := 1; i < len(ackAt); i++ {
		gap = max(gap, ackAt[i].Sub(ackAt[i-1]))
	}
	i, _ := slices.BinarySearchFunc(ackAt, killAt, func(a, b time.Time) int { return a.Compare(b) })
	t.Logf("%d records through a SIGKILL of the leader (at %d acknowledged, %d read); the standby served Kafka on %s %s after the kill; longest pause in acks %s (%d batches before the kill); 0 lost, 0 duplicated",
		standbyKafkaRecords, atKill, readAtKill, kaddr, took.Round(time.Millisecond), gap.Round(time.Millisecond), i)
}
