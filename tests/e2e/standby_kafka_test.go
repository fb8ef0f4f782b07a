package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/tests/testproc"
)

// STRAND_STANDBY_KAFKA_KILLS sets how many times
// TestStandbyKafkaThroughKill9 kills the leader (default 1),
// STRAND_STANDBY_KAFKA_TERMS how many times TestStandbyKafkaHandoverSIGTERM
// stops it (unset: that test is skipped).
const (
	standbyKafkaKillsEnv = "STRAND_STANDBY_KAFKA_KILLS"
	standbyKafkaTermsEnv = "STRAND_STANDBY_KAFKA_TERMS"
	standbyKafkaParts    = 2
	standbyKafkaBetween  = 1000 // records acknowledged before each kill and after the last
	standbyKafkaBatch    = 50
	// standbyKafkaP99 bounds the p99 pause of a run of 20 or more SIGTERM
	// handovers (the producer's acks and the consumer's reads): the drain
	// holds a produce it refused and closes the connection (ADR 0071), so
	// clients reconnect without a metadata refresh.
	standbyKafkaP99 = time.Second
)

// TestStandbyKafkaThroughKill9: two `strand dev --standby` on one data
// directory and one Kafka address (each its own API address). The waiting
// standby says in its output that the Kafka port is the leader's. An
// idempotent Kafka producer (kgo, batch after batch, each waited for) and
// a consumer, both given only the Kafka address, run while the leader is
// killed with SIGKILL (once; STRAND_STANDBY_KAFKA_KILLS times, a new
// standby started on the dead one's API address each time): the standby
// takes over and serves Kafka on that same address (binding it once the
// dead leader's socket is released), the producer's retries and the
// consumer's fetches reach it with no configuration, every acknowledged
// record is in the topic exactly once and nothing else is, and the
// consumer reads on from where it was, each partition's offsets and
// records in order from 0. Logs each kill's pause (the longest gap
// between consecutive acks, and between consecutive polls that returned
// records, from the kill until the standby served) and the time from the
// kill to the standby serving, p50, p99 and max.
func TestStandbyKafkaThroughKill9(t *testing.T) {
	runStandbyKafka(t, syscall.SIGKILL, envCount(t, standbyKafkaKillsEnv, 1))
}

// TestStandbyKafkaHandoverSIGTERM: as TestStandbyKafkaThroughKill9, the
// leader stopped with SIGTERM (it drains, holding the produces it
// refuses, closes its Kafka front end last, then frees the data
// directory; ADR 0071) STRAND_STANDBY_KAFKA_TERMS times; only when
// that is set (make standby-kills sets it to 20): the default run has
// TestStandbyHandoverSIGTERM for the API's handover and this test's kill
// for Kafka's. Over 20 stops or more, the p99 pause of the producer's
// acks and of the consumer's reads must be under standbyKafkaP99.
func TestStandbyKafkaHandoverSIGTERM(t *testing.T) {
	if os.Getenv(standbyKafkaTermsEnv) == "" {
		t.Skip("set " + standbyKafkaTermsEnv + " (make standby-kills)")
	}
	runStandbyKafka(t, syscall.SIGTERM, envCount(t, standbyKafkaTermsEnv, 1))
}

// runStandbyKafka stops the leader with sig kills times under a Kafka
// producer and consumer; see TestStandbyKafkaThroughKill9.
func runStandbyKafka(t *testing.T, sig syscall.Signal, kills int) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	kaddr := testproc.FreeAddr(t)
	pair := newStandbyPair(t, "--kafka-addr", kaddr)
	if l := pair.procs[1].said("waiting to lead"); !strings.Contains(l, "Kafka on "+kaddr) || !strings.Contains(l, "leader") {
		t.Errorf("the waiting standby said %q, want it to say the Kafka port %s is the leader's until it leads", l, kaddr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(kills)*20*time.Second+time.Minute)
	defer cancel()
	newClient, adm := kafkaClients(t, ctx, kaddr, time.Minute, "sk9", standbyKafkaParts)

	// The producer: "sk9-<n>" to partition n%parts, batch after batch,
	// each waited for, until stop; kgo retries through each takeover on
	// its own. acked counts the records acknowledged (all it produced).
	var mu sync.Mutex
	acked := 0
	var ackAt []time.Time
	stop := make(chan struct{})
	prodErr := make(chan error, 1)
	go func() {
		p := newClient(kgo.RecordPartitioner(kgo.ManualPartitioner()))
		for n := 0; ; n += standbyKafkaBatch {
			select {
			case <-stop:
				prodErr <- nil
				return
			default:
			}
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
	}()
	ackedNow := func() int { mu.Lock(); defer mu.Unlock(); return acked }

	// The consumer: one client from the start of both partitions, polling
	// through every kill; each partition must read offsets 0, 1, 2... and
	// that partition's records in the order they were produced. readAt
	// holds when each poll that returned records returned.
	c := newClient(kgo.ConsumeTopics("sk9"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	next := map[int32]int64{}
	read := 0
	var bad []string
	var readAt []time.Time
	stopReading := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			select {
			case <-stopReading:
				return
			default:
			}
			pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			fs := c.PollFetches(pctx)
			pcancel()
			mu.Lock()
			n := read
			fs.EachRecord(func(r *kgo.Record) {
				want := fmt.Sprintf("sk9-%d", int(next[r.Partition])*standbyKafkaParts+int(r.Partition))
				if r.Offset != next[r.Partition] || string(r.Value) != want {
					bad = append(bad, fmt.Sprintf("sk9/%d offset %d %q, want offset %d %q", r.Partition, r.Offset, r.Value, next[r.Partition], want))
				}
				next[r.Partition] = r.Offset + 1
				read++
			})
			if read > n {
				readAt = append(readAt, time.Now())
			}
			mu.Unlock()
		}
	}()
	defer func() {
		close(stopReading)
		<-readerDone
	}()
	// await waits until done holds (checked every 10 ms), failing the test
	// at the deadline.
	await := func(done func() bool) {
		for {
			mu.Lock()
			ok := done()
			got, want := read, acked
			mu.Unlock()
			if ok {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("the consumer read %d records (%d acknowledged) before the deadline", got, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// advance waits for standbyKafkaBetween more acknowledged records and
	// for the consumer to have read half of them.
	advance := func() {
		want := ackedNow() + standbyKafkaBetween
		await(func() bool { return acked >= want && read >= want-standbyKafkaBetween/2 })
	}

	var killAt []time.Time
	var takeovers []time.Duration
	for k := range kills {
		advance()
		select {
		case err := <-prodErr:
			t.Fatalf("the producer stopped before stop %d: %v", k, err)
		default:
		}
		led, at, took := pair.handOver(k, sig)
		// It prints its Kafka address just after "serving on".
		l := ""
		for deadline := time.Now().Add(5 * time.Second); l == "" && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			l = led.said("Kafka clients")
		}
		if !strings.Contains(l, kaddr) {
			t.Fatalf("stop %d: the standby leads but says %q, want it to serve Kafka on %s", k, l, kaddr)
		}
		killAt = append(killAt, at)
		takeovers = append(takeovers, took)
	}
	advance()
	close(stop)
	if err := <-prodErr; err != nil {
		t.Fatalf("the producer: %v", err)
	}
	total := ackedNow()
	await(func() bool { return read >= total })
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("the consumer read %d records out of place (lost, duplicated or rewound), first: %s", len(bad), bad[0])
	}
	if read != total {
		t.Fatalf("the consumer read %d records, want the %d acknowledged", read, total)
	}
	// The topic's end: nothing past what was acknowledged (a duplicate
	// would be a record after the last).
	ends, err := adm.ListEndOffsets(ctx, "sk9")
	if err != nil {
		t.Fatal(err)
	}
	var end int64
	ends.Each(func(o kadm.ListedOffset) { end += o.Offset })
	if end != int64(total) {
		t.Fatalf("the topic ends at %d records in all, want the %d acknowledged (lost or duplicated)", end, total)
	}

	round := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	sigName := map[syscall.Signal]string{syscall.SIGKILL: "SIGKILL", syscall.SIGTERM: "SIGTERM"}[sig]
	gaps, rgaps := pauses(t, ackAt, killAt, takeovers), pauses(t, readAt, killAt, takeovers)
	over := func(gs []time.Duration) int {
		n := 0
		for _, g := range gs {
			if g > time.Second {
				n++
			}
		}
		return n
	}
	t.Logf("Kafka, %s x %d: pause in acks p50 %s p99 %s max %s (%d over 1 s), in reads p50 %s p99 %s max %s (%d over 1 s); signal to standby serving (Kafka bound) p50 %s p99 %s max %s; %d records acknowledged and read once, in order: 0 lost, 0 duplicated",
		sigName, kills, round(percentile(gaps, 0.5)), round(percentile(gaps, 0.99)), round(slices.Max(gaps)), over(gaps),
		round(percentile(rgaps, 0.5)), round(percentile(rgaps, 0.99)), round(slices.Max(rgaps)), over(rgaps),
		round(percentile(takeovers, 0.5)), round(percentile(takeovers, 0.99)), round(slices.Max(takeovers)), total)
	for _, p := range []struct {
		what string
		gaps []time.Duration
	}{{"the Kafka producer's acks", gaps}, {"the Kafka consumer's reads", rgaps}} {
		if m := slices.Max(p.gaps); m > standbyGapBound {
			t.Errorf("a %s paused %s for %s, over %s", sigName, p.what, round(m), standbyGapBound)
		}
		if q := percentile(p.gaps, 0.99); sig == syscall.SIGTERM && kills >= 20 && q > standbyKafkaP99 {
			t.Errorf("%d %s handovers paused %s for %s at p99, over %s", kills, sigName, p.what, round(q), standbyKafkaP99)
		}
	}
}

// pauses is each kill's pause in events at (sorted): the longest gap
// between consecutive events from the kill until the standby served
// (killAt[k] + took[k]).
func pauses(t *testing.T, at, killAt []time.Time, took []time.Duration) []time.Duration {
	t.Helper()
	var gaps []time.Duration
	for k, kill := range killAt {
		served := kill.Add(took[k])
		j, _ := slices.BinarySearchFunc(at, kill, func(a, b time.Time) int { return a.Compare(b) })
		if j == 0 || j == len(at) {
			t.Fatalf("no events on both sides of kill %d", k)
		}
		var g time.Duration
		for ; j < len(at) && !at[j-1].After(served); j++ {
			g = max(g, at[j].Sub(at[j-1]))
		}
		gaps = append(gaps, g)
	}
	return gaps
}
