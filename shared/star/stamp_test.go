package star

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// stamped encodes recs as a batch, stamps it under c at now and returns
// the timestamps (nil and the error when refused).
func stamped(recs []format.Record, c format.StreamConfig, now int64) ([]int64, error) {
	b := &batch{}
	b.init(nil, recs, 0)
	if err := b.stamp(c, now); err != nil {
		return nil, err
	}
	var out []int64
	rr := format.NewRecordReader(b.enc)
	var r format.Record
	for rr.Next(&r) {
		out = append(out, r.TimestampMs)
	}
	return out, rr.Err()
}

// TestStamp: every timestamp mode, capped and uncapped, on a batch of a
// record without a timestamp, one in the past, one at arrival and one far
// in the future (2^63-1, which pinned a stream before issue 20, and an
// uncapped stream's retention before issue 31).
func TestStamp(t *testing.T) {
	const now = 1_700_000_000_000
	in := []int64{0, now - 5000, now, math.MaxInt64}
	mode := func(m metastore.TimestampMode) uint8 { return uint8(m) }
	for _, tc := range []struct {
		name string
		c    format.StreamConfig
		want []int64 // nil: refused
	}{
		{"client-prefer, capped (the default)", format.StreamConfig{}, []int64{now, now - 5000, now, now}},
		{"client-prefer, uncapped", format.StreamConfig{Uncapped: true}, nil},
		{"client-require, capped", format.StreamConfig{TimestampMode: mode(metastore.TimestampClientRequire)}, nil},
		{"arrival", format.StreamConfig{TimestampMode: mode(metastore.TimestampArrival)}, []int64{now, now, now, now}},
		{"arrival, uncapped", format.StreamConfig{TimestampMode: mode(metastore.TimestampArrival), Uncapped: true}, []int64{now, now, now, now}},
	} {
		recs := make([]format.Record, len(in))
		for i, ts := range in {
			recs[i].TimestampMs = ts
		}
		got, err := stamped(recs, tc.c, now)
		if tc.want == nil {
			if !errors.Is(err, ErrTimestampRequired) && !errors.Is(err, ErrTimestampTooFar) {
				t.Errorf("%s: %v, want ErrTimestampRequired or ErrTimestampTooFar", tc.name, err)
			}
			continue
		}
		for i := range tc.want {
			if err != nil || got[i] != tc.want[i] {
				t.Errorf("%s: record %d: %v %v, want %d", tc.name, i, got, err, tc.want[i])
			}
		}
	}
	// Uncapped, a client timestamp is kept up to MaxAheadMs after arrival,
	// and refused one ms further (the batch, whole), in both client modes.
	for _, m := range []uint8{mode(metastore.TimestampClientPrefer), mode(metastore.TimestampClientRequire)} {
		c := format.StreamConfig{TimestampMode: m, Uncapped: true}
		got, err := stamped([]format.Record{{TimestampMs: now - 1}, {TimestampMs: now + MaxAheadMs}}, c, now)
		if err != nil || got[0] != now-1 || got[1] != now+MaxAheadMs {
			t.Errorf("mode %d, uncapped, at the bound: %v %v, want kept", m, got, err)
		}
		if got, err := stamped([]format.Record{{TimestampMs: now - 1}, {TimestampMs: now + MaxAheadMs + 1}}, c, now); !errors.Is(err, ErrTimestampTooFar) {
			t.Errorf("mode %d, uncapped, 1 ms past the bound: %v %v, want ErrTimestampTooFar", m, got, err)
		}
	}
	// client-require with every record stamped: kept, capped.
	got, err := stamped([]format.Record{{TimestampMs: now - 1}, {TimestampMs: now + 1}}, format.StreamConfig{TimestampMode: mode(metastore.TimestampClientRequire)}, now)
	if err != nil || got[0] != now-1 || got[1] != now {
		t.Fatalf("client-require: %v %v", got, err)
	}
}

// TestReconfigureIsSequenced: a config command changes the timestamping
// exactly from its own seq: a batch sequenced before it is judged by the
// old mode, every batch after it by the new one; a patch keeps the fields
// it does not set; the flight carries the config record with the full new
// configuration, and the command state carries it on.
func TestReconfigureIsSequenced(t *testing.T) {
	h := newHarness(t, metastore.Standard, 1, 1)
	h.start()
	id := sid(0)
	if err := h.star.Open(StreamInfo{ID: id, Class: metastore.Standard, Config: format.StreamConfig{RetentionMs: 1000}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	noTs := []format.Record{{Body: []byte("x")}}
	if _, err := h.star.Append(ctx, id, noTs, AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	req := uint8(metastore.TimestampClientRequire)
	a, cfg, err := h.star.Reconfigure(ctx, id, ConfigPatch{TimestampMode: &req})
	if err != nil || a.FirstSeq != 1 || cfg != (format.StreamConfig{RetentionMs: 1000, TimestampMode: req}) {
		t.Fatalf("reconfigure: %+v %+v %v", a, cfg, err)
	}
	if _, err := h.star.Append(ctx, id, noTs, AppendOptions{}); !errors.Is(err, ErrTimestampRequired) {
		t.Fatalf("a record without a timestamp after client-require: %v", err)
	}
	if a, err := h.star.Append(ctx, id, []format.Record{{TimestampMs: 5, Body: []byte("y")}}, AppendOptions{}); err != nil || a.FirstSeq != 2 {
		t.Fatalf("a record with one: %+v %v", a, err)
	}
	neg := int64(-1)
	if _, _, err := h.star.Reconfigure(ctx, id, ConfigPatch{RetentionMs: &neg}); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("negative retention: %v", err)
	}
	if c, _ := h.star.Commands(id); !c.HasConfig || c.Config != cfg {
		t.Fatalf("acknowledged state %+v", c)
	}
	var bodies []format.StreamConfig
	h.eachRecord(func(_ format.Flight, r format.Record) {
		if format.CommandOf(r) == format.CommandConfig {
			c, err := format.DecodeConfig(r.Body)
			if err != nil {
				t.Fatal(err)
			}
			bodies = append(bodies, c)
		}
	})
	if len(bodies) != 1 || bodies[0] != cfg {
		t.Fatalf("config records %+v, want one with %+v", bodies, cfg)
	}
}

// TestStampNeverPastMaxAhead is the invariant retention relies on (ADR
// 0060): whatever the stream's configuration and the client's timestamps,
// a stamped record's timestamp is at most MaxAheadMs after arrival, and a
// batch is refused only when it holds a client timestamp past that (on an
// uncapped stream) or lacks one (client-require). Seeded random batches.
func TestStampNeverPastMaxAhead(t *testing.T) {
	const now = 1_700_000_000_000
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 31))
	pick := []int64{0, 1, now - 1, now, now + 1, now + MaxAheadMs - 1, now + MaxAheadMs, now + MaxAheadMs + 1, math.MaxInt64}
	for range 2000 {
		c := format.StreamConfig{TimestampMode: uint8(rng.IntN(3)), Uncapped: rng.IntN(2) == 1}
		recs := make([]format.Record, 1+rng.IntN(4))
		tooFar, missing := false, false
		for i := range recs {
			recs[i].TimestampMs = pick[rng.IntN(len(pick))]
			tooFar = tooFar || recs[i].TimestampMs > now+MaxAheadMs
			missing = missing || recs[i].TimestampMs == 0
		}
		mode := metastore.TimestampMode(c.TimestampMode)
		wantRefused := mode != metastore.TimestampArrival && (c.Uncapped && tooFar || mode == metastore.TimestampClientRequire && missing)
		got, err := stamped(recs, c, now)
		if (err != nil) != wantRefused {
			t.Fatalf("seed %d: config %+v, timestamps %v: %v %v, want refused %v", seed, c, recs, got, err, wantRefused)
		}
		for i, ts := range got {
			if ts > now+MaxAheadMs || ts <= 0 {
				t.Fatalf("seed %d: config %+v: record %d stamped %d, past arrival + MaxAheadMs (%d) or not positive", seed, c, i, ts, now+MaxAheadMs)
			}
		}
	}
}
