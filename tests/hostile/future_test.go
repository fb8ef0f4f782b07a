package hostile

import (
	"context"
	"math"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/star"
)

// TestFarFutureTimestampRefused (issue 31): on an uncapped stream with a
// retention, a record stamped far in the future (2^63-1) was kept, and since
// a stream's timestamps never decrease it and every later record stayed
// past retention forever. Now a client timestamp at most star.MaxAheadMs
// after arrival is kept and one beyond is invalid_argument, nothing
// written.
func TestFarFutureTimestampRefused(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := e.client(t, e.admin)
	const name = "future/uncapped"
	if _, err := admin.CreateStream(ctx, name, client.CreateOptions{Class: "express", RetentionMs: 60_000, Uncapped: true}); err != nil {
		t.Fatal(err)
	}
	first, err := admin.Append(ctx, name, []client.Record{{Body: []byte("now")}}, client.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	arrival := first.LastTsMs
	for _, ts := range []int64{math.MaxInt64, arrival + 2*star.MaxAheadMs} {
		_, err := admin.Append(ctx, name, []client.Record{{Body: []byte("far"), TimestampMs: ts}}, client.AppendOptions{})
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("timestamp %d (%d ms after arrival): %v, want invalid_argument", ts, ts-arrival, err)
		}
	}
	tail, err := admin.CheckTail(ctx, name)
	if err != nil || tail.NextSeq != first.EndSeq {
		t.Fatalf("the refused appends wrote something: tail %+v %v, want %d", tail, err, first.EndSeq)
	}
	ack, err := admin.Append(ctx, name, []client.Record{{Body: []byte("ahead"), TimestampMs: arrival + star.MaxAheadMs}}, client.AppendOptions{})
	if err != nil || ack.LastTsMs != arrival+star.MaxAheadMs {
		t.Errorf("a timestamp %d ms ahead (the bound): %+v %v, want kept", star.MaxAheadMs, ack, err)
	}
}
