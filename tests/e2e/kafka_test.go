package e2e

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/tests/testproc"
)

const (
	kafkaRecords = 6000
	kafkaParts   = 4
	kafkaKillAt  = 2000 // acknowledged records before the SIGKILL (half of it a multiple of kafkaBatch)
	kafkaBatch   = 200
)

// TestKafkaThroughKill9 runs an idempotent Kafka producer (kgo) and a
// consumer group member against `strand dev`, kills strand dev with
// SIGKILL in the middle and starts it again on the same data and
// addresses. The producer retries through the outage on its own (same
// producer id, epoch and sequences): the topic ends with every record
// exactly once (0 lost, 0 duplicated). The group member, which committed
// half way, rejoins and every partition resumes at the offset the group
// had committed when strand dev died, no earlier.
func TestKafkaThroughKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := testproc.Build(t, "./cmd/strand")
	dataDir := filepath.Join(t.TempDir(), "data")
	addr, kaddr := testproc.FreeAddr(t), testproc.FreeAddr(t)
	start := func() *dev { return startDev(t, bin, dataDir, addr, "--kafka-addr", kaddr) }
	d := start()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	newClient, adm := kafkaClients(t, ctx, kaddr, 2*time.Minute, "k9", kafkaParts)

	// The producer: records "k9-<n>" to partition n%4, in batches, each
	// batch waited for; kgo retries through the outage. It pauses twice,
	// so that the test's steps land where they should however fast
	// strand dev acknowledges: at kafkaKillAt/2 acknowledged records
	// until the group has committed (its commit is then half way), and
	// at kafkaKillAt until the kill is under way (the kill then lands
	// while it produces). On speed alone, with Standard's idle cut, it
	// finished all 6,000 before the group had read 2,000, and the group
	// could read all it was going to before its "half way" commit.
	var mu sync.Mutex
	acked := 0
	prodErr := make(chan error, 1)
	committedHalf, resume := make(chan struct{}), make(chan struct{})
	go func() {
		p := newClient(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxBufferedRecords(kafkaBatch*2))
		for n := 0; n < kafkaRecords; n += kafkaBatch {
			gate := map[int]chan struct{}{kafkaKillAt / 2: committedHalf, kafkaKillAt: resume}[n]
			if gate != nil {
				select {
				case <-gate:
				case <-ctx.Done():
					prodErr <- fmt.Errorf("paused at %d: %w", n, ctx.Err())
					return
				}
			}
			var recs []*kgo.Record
			for i := n; i < n+kafkaBatch; i++ {
				recs = append(recs, &kgo.Record{Topic: "k9", Partition: int32(i % kafkaParts), Value: fmt.Appendf(nil, "k9-%d", i)})
			}
			if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				prodErr <- fmt.Errorf("batch from %d: %w", n, err)
				return
			}
			mu.Lock()
			acked += len(recs)
			mu.Unlock()
		}
		prodErr <- nil
	}()

	// The group member: remembers the last offset it read per partition
	// and every rewind (an offset at or below one it read before).
	type rewind struct {
		p   int32
		off int64
	}
	last := map[int32]int64{}
	var rewinds []rewind
	consumed := map[string]bool{}
	// An eager balancer: on rejoining after the restart the member gives
	// up its partitions and starts them again from the group's commits
	// (a cooperative one would keep reading from where it was).
	c := newClient(kgo.ConsumerGroup("k9-group"), kgo.ConsumeTopics("k9"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.Balancers(kgo.RangeBalancer()), kgo.DisableAutoCommit(), kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(100*time.Millisecond))
	poll := func(until func() bool) {
		pollKafka(t, ctx, c, 500*time.Millisecond, until, func(r *kgo.Record) {
			mu.Lock()
			defer mu.Unlock()
			if prev, ok := last[r.Partition]; ok && r.Offset <= prev {
				rewinds = append(rewinds, rewind{r.Partition, r.Offset})
			}
			last[r.Partition] = r.Offset
			consumed[string(r.Value)] = true
		}, func() string {
			mu.Lock()
			defer mu.Unlock()
			return fmt.Sprintf("the group read %d distinct records", len(consumed))
		})
	}
	// The group commits once, half way, and reads on: after the restart
	// it must resume at that commit, reading again what came after it.
	poll(func() bool { mu.Lock(); defer mu.Unlock(); return len(consumed) >= kafkaKillAt/2 })
	if err := c.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	close(committedHalf)
	poll(func() bool { mu.Lock(); defer mu.Unlock(); return acked >= kafkaKillAt && len(consumed) >= kafkaKillAt })

	// The producer goes on as strand dev dies: its next batch meets the
	// kill in flight or the outage after it.
	close(resume)
	d.kill()
	mu.Lock()
	rewinds = nil
	atKill, readAtKill := acked, len(consumed)
	lastAtKill := maps.Clone(last)
	mu.Unlock()
	if atKill >= kafkaRecords {
		t.Fatalf("the producer had finished (%d acknowledged) before the kill", atKill)
	}
	d = start()
	committed, err := adm.FetchOffsets(ctx, "k9-group")
	if err != nil {
		t.Fatal(err)
	}
	// The commit is half way: behind what the group had read at the kill,
	// so resuming at it reads something again.
	for p, off := range lastAtKill {
		if o, ok := committed.Lookup("k9", p); !ok || o.At > off {
			t.Fatalf("the group's commit on k9/%d is %+v (found %v), not behind offset %d it had read at the kill", p, o, ok, off)
		}
	}
	poll(func() bool { mu.Lock(); defer mu.Unlock(); return len(consumed) == kafkaRecords })
	// The member may read the rest before it learns that its group died
	// with strand dev (a fast strand dev acknowledges the 4,000 records
	// after the restart in well under a second): it reads on until it
	// has rejoined and read again from the group's commits, for at most
	// a few session timeouts.
	rejoinBy := time.Now().Add(20 * time.Second)
	poll(func() bool { mu.Lock(); defer mu.Unlock(); return len(rewinds) > 0 || time.Now().After(rejoinBy) })
	if err := <-prodErr; err != nil {
		t.Fatalf("the producer: %v", err)
	}
	mu.Lock()
	if len(rewinds) == 0 {
		t.Errorf("the group read nothing again after the restart: it did not resume at its commit (half way) but where it was")
	}
	for _, r := range rewinds {
		o, ok := committed.Lookup("k9", r.p)
		if !ok || r.off < o.At {
			t.Errorf("after the restart the group read k9/%d from offset %d, before its commit %+v (found %v)", r.p, r.off, o, ok)
		}
	}
	mu.Unlock()

	// Read the whole topic back: every record exactly once.
	all := newClient(kgo.ConsumeTopics("k9"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]int{}
	total := 0
	for total < kafkaRecords {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := all.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			break
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; total++ })
		if fs.NumRecords() == 0 && total > 0 {
			break
		}
	}
	dups := 0
	for _, n := range seen {
		dups += n - 1
	}
	if lost := kafkaRecords - len(seen); lost != 0 || dups != 0 {
		t.Fatalf("the topic holds %d records: %d of %d lost, %d duplicated", total, lost, kafkaRecords, dups)
	}
	t.Logf("%d records through a SIGKILL (at %d acknowledged, %d read by the group): 0 lost, 0 duplicated; the group resumed at its commits (%d rewinds after the restart)",
		kafkaRecords, atKill, readAtKill, len(rewinds))
}

// kafkaClients makes the topic (parts partitions) through an admin client
// of the Kafka front end at kaddr and returns the admin client and a maker
// of more clients there, each given kgo's delivery and retry timeouts of
// retry and closed when the test ends.
func kafkaClients(t *testing.T, ctx context.Context, kaddr string, retry time.Duration, topic string, parts int32) (newClient func(...kgo.Opt) *kgo.Client, adm *kadm.Client) {
	t.Helper()
	newClient = func(more ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(kaddr), kgo.RecordDeliveryTimeout(retry), kgo.RetryTimeout(retry)}, more...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	adm = kadm.NewClient(newClient())
	if r, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil || r.Err != nil {
		t.Fatalf("create topic %s: %v %v", topic, err, r.Err)
	}
	return newClient, adm
}

// pollKafka polls c (each poll bounded by every), handing every record to
// each, until until holds; it fails the test if ctx ends first, saying
// what says how far it got.
func pollKafka(t *testing.T, ctx context.Context, c *kgo.Client, every time.Duration, until func() bool, each func(*kgo.Record), what func() string) {
	t.Helper()
	for !until() {
		if ctx.Err() != nil {
			t.Fatalf("%s before the deadline", what())
		}
		pctx, pcancel := context.WithTimeout(ctx, every)
		fs := c.PollFetches(pctx)
		pcancel()
		fs.EachRecord(each)
	}
}
