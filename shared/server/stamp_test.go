package server_test

import (
	"context"
	"math"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/client"
)

// TestTimestampModes: through the API, per stream mode: a future client
// timestamp (an hour ahead) no longer pins a capped stream; uncapped keeps
// it (and, timestamps never decreasing, the records after it get it too;
// one more than 24 h ahead is refused: hostile.TestFarFutureTimestampRefused); arrival
// ignores client timestamps; client-require refuses a record without one.
// Reads by timestamp find, in every mode, the first record whose
// timestamp is at least T, checked against the timestamps the test
// expects from what it sent, not against the server's answers alone.
func TestTimestampModes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := newNode(t, newMeta(t), "s1", true, nil)
	c := newClient(t, n, adminTok)
	past := time.Now().Add(-time.Hour).UnixMilli()
	future := time.Now().Add(time.Hour).UnixMilli()
	sent := []int64{past, future, past + 1000, 0}
	// lo/hi bound "arrival" for the records; want returns the expected
	// timestamps for a mode (exact, or -1: arrival, checked in [lo, hi]).
	for _, tc := range []struct {
		mode     string
		uncapped bool
		want     []int64
	}{
		{"client-prefer", false, []int64{past, -1, -1, -1}}, // capped: the future one is arrival, then never below it
		{"client-prefer", true, []int64{past, future, future, future}},
		{"arrival", false, []int64{-1, -1, -1, -1}},
	} {
		name := "ts-" + tc.mode
		if tc.uncapped {
			name += "-uncapped"
		}
		s, err := c.CreateStream(ctx, name, client.CreateOptions{Timestamping: tc.mode, Uncapped: tc.uncapped})
		if err != nil || s.Timestamping != tc.mode || s.Uncapped != tc.uncapped {
			t.Fatalf("create %s: %+v %v", name, s, err)
		}
		lo := time.Now().UnixMilli()
		for _, ts := range sent {
			if _, err := c.Append(ctx, name, []client.Record{{TimestampMs: ts, Body: []byte("x")}}, client.AppendOptions{}); err != nil {
				t.Fatalf("%s: append %d: %v", name, ts, err)
			}
		}
		hi := time.Now().UnixMilli()
		res, err := c.Read(ctx, name, client.FromSeq(0), client.Limits{})
		if err != nil || len(res.Records) != len(sent) {
			t.Fatalf("%s: read %d records, %v", name, len(res.Records), err)
		}
		prev := int64(math.MinInt64)
		for i, r := range res.Records {
			got, want := r.TimestampMs, tc.want[i]
			if (want >= 0 && got != want) || (want < 0 && (got < lo || got > hi)) || got < prev {
				t.Fatalf("%s: record %d timestamp %d, want %d (arrival in [%d, %d]), previous %d", name, i, got, want, lo, hi, prev)
			}
			prev = got
		}
		// Reads by timestamp: the first record at or after T.
		for _, T := range []int64{past - 1, past, past + 1, lo, hi + 1, future, future + 1, math.MaxInt64} {
			wantSeq := uint64(len(sent)) // none: the tail
			for i, r := range res.Records {
				if r.TimestampMs >= T {
					wantSeq = uint64(i)
					break
				}
			}
			got, err := c.Read(ctx, name, client.FromTimestamp(T), client.Limits{Count: 1})
			switch {
			case err != nil:
				t.Fatalf("%s: read from %d: %v", name, T, err)
			case wantSeq == uint64(len(sent)) && len(got.Records) != 0:
				t.Fatalf("%s: read from %d: seq %d, want none", name, T, got.Records[0].Seq)
			case wantSeq < uint64(len(sent)) && (len(got.Records) != 1 || got.Records[0].Seq != wantSeq):
				t.Fatalf("%s: read from %d: %+v, want seq %d", name, T, got.Records, wantSeq)
			}
		}
	}
	if _, err := c.CreateStream(ctx, "ts-required", client.CreateOptions{Timestamping: "client-require"}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Append(ctx, "ts-required", []client.Record{{TimestampMs: past, Body: []byte("a")}, {Body: []byte("b")}}, client.AppendOptions{})
	wantCodeMsg(t, err, connect.CodeInvalidArgument, "record 1 has no timestamp_ms")
	if tail, err := c.CheckTail(ctx, "ts-required"); err != nil || tail.NextSeq != 0 {
		t.Fatalf("a refused batch changed the tail: %+v %v", tail, err)
	}
	if _, err := c.Append(ctx, "ts-required", []client.Record{{TimestampMs: past, Body: []byte("a")}}, client.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
}
