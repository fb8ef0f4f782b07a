package server

import (
	"math"
	"testing"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// TestStamp: every timestamp mode, capped and uncapped, on a batch of a
// record without a timestamp, one in the past, one at arrival and one far
// in the future (2^63-1, which pinned a stream before issue 20).
func TestStamp(t *testing.T) {
	const now = 1_700_000_000_000
	in := []int64{0, now - 5000, now, math.MaxInt64}
	for _, tc := range []struct {
		name string
		ts   metastore.Timestamping
		want []int64 // nil: refused
	}{
		{"client-prefer, capped (the default)", metastore.Timestamping{}, []int64{now, now - 5000, now, now}},
		{"client-prefer, uncapped", metastore.Timestamping{Uncapped: true}, []int64{now, now - 5000, now, math.MaxInt64}},
		{"client-require, capped", metastore.Timestamping{Mode: metastore.TimestampClientRequire}, nil},
		{"arrival", metastore.Timestamping{Mode: metastore.TimestampArrival}, []int64{now, now, now, now}},
		{"arrival, uncapped", metastore.Timestamping{Mode: metastore.TimestampArrival, Uncapped: true}, []int64{now, now, now, now}},
	} {
		recs := make([]format.Record, len(in))
		for i, ts := range in {
			recs[i].TimestampMs = ts
		}
		err := stamp("s", tc.ts, now, recs)
		if tc.want == nil {
			if connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Errorf("%s: %v, want invalid_argument", tc.name, err)
			}
			continue
		}
		for i, r := range recs {
			if err != nil || r.TimestampMs != tc.want[i] {
				t.Errorf("%s: record %d: %d %v, want %d", tc.name, i, r.TimestampMs, err, tc.want[i])
			}
		}
	}
	// client-require with every record stamped: kept, capped.
	recs := []format.Record{{TimestampMs: now - 1}, {TimestampMs: now + 1}}
	if err := stamp("s", metastore.Timestamping{Mode: metastore.TimestampClientRequire}, now, recs); err != nil || recs[0].TimestampMs != now-1 || recs[1].TimestampMs != now {
		t.Fatalf("client-require: %+v %v", recs, err)
	}
}
