package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/node"
	"github.com/strandlog/strand/shared/star"
)

// startSettling runs a node on s whose in-process settlement flushes every
// stream at once (FlushBytes 1) and settles and trims every 20 ms, so a
// small stream's records end in one settled ref quickly.
func (s *stores) startSettling(t *testing.T) *node.Node {
	t.Helper()
	cfg := star.Defaults()
	cfg.Express.Buckets, cfg.Standard.Buckets = s.exp, s.std
	cfg.Standard.FlushDeadline = time.Millisecond
	n, err := node.Start(context.Background(), node.Config{Star: cfg, Meta: s.meta, Settled: s.settled, Addr: "127.0.0.1:0", NoAuth: true, Logger: testLogger(),
		Kafka:      node.KafkaConfig{Addr: "127.0.0.1:0", AnonymousLoopback: true, AutoCreateTopics: true},
		FlushBytes: 1, FlushAge: time.Millisecond, SettleEvery: 20 * time.Millisecond, TrimEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTrimmedAndExpiredNeverServed (ADR 0075): a small stream (ten
// records, one settled ref: trim drops whole refs and never a stream's
// last one, so its records below the trim point stay stored) trimmed at
// 5, and a small stream whose first five records are past its retention.
// Whatever storage keeps, nothing below the point is served: a strand
// read from 0 starts at 5, ListOffsets earliest is 5, a fetch at 0
// answers OFFSET_OUT_OF_RANGE with log start offset 5; before and after
// settle and trim, and after a restart (the star recovers its commands
// from storage).
func TestTrimmedAndExpiredNeverServed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := newStores()
	n := s.startSettling(t)
	defer func() { n.Close() }()
	retention := "3600000"
	createTopic(t, n.KafkaAddr(), "trimmed", 1, nil)
	createTopic(t, n.KafkaAddr(), "expired", 1, map[string]*string{"retention.ms": &retention})
	cl := newClient(t, n.KafkaAddr())
	now := time.Now()
	var recs []*kgo.Record
	for i := range 10 {
		ts := now // expired: 0-4 two hours old, 5-9 now
		if i < 5 {
			ts = now.Add(-2 * time.Hour)
		}
		recs = append(recs, &kgo.Record{Topic: "trimmed", Value: []byte{byte(i)}, Timestamp: now},
			&kgo.Record{Topic: "expired", Value: []byte{byte(i)}, Timestamp: ts})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if _, err := strandClient(t, n.Endpoint()).Trim(ctx, "trimmed/0", 5, client.TrimOptions{}); err != nil { // seq 10
		t.Fatal(err)
	}
	tails := map[string]uint64{"trimmed/0": 11, "expired/0": 10}
	served := func(when string) {
		t.Helper()
		sc := strandClient(t, n.Endpoint())
		kc := newClient(t, n.KafkaAddr())
		adm := kadm.NewClient(kc)
		for _, topic := range []string{"trimmed", "expired"} {
			res, err := sc.Read(ctx, topic+"/0", client.FromSeq(0), client.Limits{Count: 100})
			if err != nil {
				t.Fatalf("%s: read %s from 0: %v", when, topic, err)
			}
			if len(res.Records) == 0 || res.Records[0].Seq != 5 || res.NextSeq != tails[topic+"/0"] {
				var got []uint64
				for _, r := range res.Records {
					got = append(got, r.Seq)
				}
				t.Fatalf("%s: a read of %s from 0 served seqs %v (tail %d); want from 5", when, topic, got, res.NextSeq)
			}
			lo, err := adm.ListStartOffsets(ctx, topic)
			if err != nil {
				t.Fatalf("%s: list start offsets of %s: %v", when, topic, err)
			}
			if o, ok := lo.Lookup(topic, 0); !ok || o.Err != nil || o.Offset != 5 {
				t.Fatalf("%s: earliest offset of %s: %+v, want 5", when, topic, o)
			}
			for _, off := range []int64{0, 4} {
				p := fetchAt(t, kc, topic, 0, off)
				if p.ErrorCode != kerr.OffsetOutOfRange.Code || len(p.RecordBatches) != 0 || p.LogStartOffset != 5 {
					t.Fatalf("%s: fetch of %s at %d: error %d, %d bytes, log start %d; want OFFSET_OUT_OF_RANGE, none, 5", when, topic, off, p.ErrorCode, len(p.RecordBatches), p.LogStartOffset)
				}
			}
		}
	}
	served("before settle")
	// Wait until settle put both streams behind refs and trim ran after.
	for _, name := range []string{"trimmed/0", "expired/0"} {
		st, err := s.meta.GetStream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		for {
			last, err := s.meta.LastRef(ctx, st.ID)
			if err == nil && last.LastSeq+1 >= tails[name] {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s never settled: last ref %+v, %v", name, last, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	time.Sleep(200 * time.Millisecond) // trim rounds
	for _, name := range []string{"trimmed/0", "expired/0"} {
		st, err := s.meta.GetStream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		refs, err := s.meta.QueryRefs(ctx, st.ID, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		// Storage may keep them (ADR 0075: a stream's last ref stays).
		t.Logf("%s after trim: %d refs, the first from seq %d", name, len(refs), refs[0].FirstSeq)
	}
	served("after settle and trim")
	n.Close()
	n = s.startSettling(t)
	served("after a restart")
}
