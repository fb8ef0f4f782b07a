package kafka_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/shared/kafka"
)

// TestLogAppendTimePerBatch produces batches 100 ms apart for 2 s to a
// LogAppendTime topic and reads them back with a consumer started after
// the last: every record's timestamp is the log's time of its own batch
// (within the wall-clock window of its produce), so the timestamps never
// decrease and there is at least one distinct timestamp per batch.
// Kafka clients give every record of a LogAppendTime batch the batch's
// max timestamp, so a fetch that served many appends in one Kafka batch
// gave them all the last one's time (1 distinct timestamp here, where a
// teammate saw 4 in 13 s of console-producer traffic).
func TestLogAppendTimePerBatch(t *testing.T) {
	n, _ := startNode(t)
	addr := n.KafkaAddr()
	lat := "LogAppendTime"
	createTopic(t, addr, "lat", 1, map[string]*string{"message.timestamp.type": &lat})
	cl := newClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const batches, per = 20, 3
	type window struct{ lo, hi int64 }
	var windows []window // by batch
	old := time.UnixMilli(1_000_000_000_000)
	for b := range batches {
		recs := make([]*kgo.Record, per)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: "lat", Value: fmt.Appendf(nil, "b%d r%d", b, i), Timestamp: old}
		}
		lo := time.Now().UnixMilli()
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce batch %d: %v", b, err)
		}
		windows = append(windows, window{lo, time.Now().UnixMilli()})
		time.Sleep(100 * time.Millisecond)
	}

	got := consume(t, addr, "lat", batches*per)
	distinct := map[int64]bool{}
	var prev int64
	for i, r := range got {
		ts := r.Timestamp.UnixMilli()
		distinct[ts] = true
		if r.Offset != int64(i) {
			t.Fatalf("record %d at offset %d, want %d", i, r.Offset, i)
		}
		if ts < prev {
			t.Errorf("record %d: timestamp %d below the previous record's %d", i, ts, prev)
		}
		prev = ts
		w := windows[i/per]
		if ts < w.lo || ts > w.hi {
			t.Errorf("record %d (batch %d): timestamp %d outside its produce's wall-clock window [%d, %d]", i, i/per, ts, w.lo, w.hi)
		}
		if r.Attrs.TimestampType() != 1 {
			t.Errorf("record %d: timestamp type %d, want 1 (LogAppendTime)", i, r.Attrs.TimestampType())
		}
	}
	if len(distinct) < batches {
		t.Errorf("%d distinct timestamps over %d batches produced 100 ms apart, want at least one per batch", len(distinct), batches)
	}

	// ListOffsets by time finds the first batch the log stamped at or
	// after it and answers the log's time, not the producer's.
	w := windows[batches/2]
	lo, err := kadm.NewClient(cl).ListOffsetsAfterMilli(ctx, w.lo, "lat")
	if err != nil {
		t.Fatal(err)
	}
	l, ok := lo.Lookup("lat", 0)
	if !ok || l.Err != nil || l.Offset != batches/2*per || l.Timestamp < w.lo || l.Timestamp > w.hi {
		t.Errorf("list offsets after %d: %+v (found %v), want offset %d stamped in [%d, %d]", w.lo, l, ok, batches/2*per, w.lo, w.hi)
	}
}

// TestEncodeBatchTimestamps encodes seeded random runs of records and
// reads each record's timestamp back as a Kafka client does (the batch's
// max timestamp under LogAppendTime, else first timestamp plus delta):
// every record reads back with its own strand timestamp (logAppend) or
// producer's timestamp, at its own offset.
func TestEncodeBatchTimestamps(t *testing.T) {
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	for range 200 {
		var recs []kafka.Fetched
		off, logTs := rng.Int64N(1000), 1_700_000_000_000+rng.Int64N(1000)
		for range 1 + rng.IntN(20) {
			off += 1 + rng.Int64N(3) // command records leave gaps
			logTs += rng.Int64N(3)   // strand timestamps never decrease
			recs = append(recs, kafka.Fetched{Offset: off, LogTs: logTs,
				Record: kafka.Record{Value: []byte("v"), Timestamp: 1_600_000_000_000 + rng.Int64N(1e6)}})
		}
		for _, logAppend := range []bool{false, true} {
			got := readTimestamps(t, kafka.EncodeBatch(nil, recs, logAppend))
			if len(got) != len(recs) {
				t.Fatalf("seed %d: %d records read back, want %d", seed, len(got), len(recs))
			}
			for i, r := range recs {
				want := r.Timestamp
				if logAppend {
					want = r.LogTs
				}
				if got[i] != [2]int64{r.Offset, want} {
					t.Fatalf("seed %d, logAppend %v: record %d read back at offset %d timestamp %d, want %d %d", seed, logAppend, i, got[i][0], got[i][1], r.Offset, want)
				}
			}
		}
	}
}

// readTimestamps decodes batches as a Kafka client does: each record's
// offset and timestamp.
func readTimestamps(t *testing.T, batches []byte) [][2]int64 {
	t.Helper()
	var out [][2]int64
	for len(batches) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(batches); err != nil {
			t.Fatalf("batch: %v", err)
		}
		batches = batches[12+int(rb.Length):]
		body := rb.Records
		for range rb.NumRecords {
			var r kmsg.Record
			if err := r.ReadFrom(body); err != nil {
				t.Fatalf("record: %v", err)
			}
			_, n := binary.Varint(body)
			body = body[n+int(r.Length):]
			ts := rb.FirstTimestamp + r.TimestampDelta64
			if rb.Attributes&0x08 != 0 {
				ts = rb.MaxTimestamp
			}
			out = append(out, [2]int64{rb.FirstOffset + int64(r.OffsetDelta), ts})
		}
	}
	return out
}
