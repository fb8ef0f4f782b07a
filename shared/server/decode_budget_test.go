package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/rawjson"
)

// maxChargeExcess is the stated factor: what decoding one append
// allocates stays within it times what the decoding budget was charged
// for it (its encoded bytes, then decodedBound).
const maxChargeExcess = 1.0

// countingHeld is a call's share of the budget that only counts.
type countingHeld struct{ n int64 }

func (h *countingHeld) take(n int64) error { h.n += n; return nil }
func (h *countingHeld) done()              {}

// appendShapes are the appends whose decoding expands the most per encoded
// byte, each within a batch's limits (the counts the codecs allow).
func appendShapes(t *testing.T) map[string]struct {
	codec connect.Codec
	b     []byte
} {
	t.Helper()
	// 1000 records and 65,535 headers, all empty: protobuf's densest.
	empty := &strandv1.AppendRequest{Stream: "s"}
	per := format.MaxBatchHeaders / format.MaxBatchRecords
	for i := range format.MaxBatchRecords {
		r := &strandv1.AppendRecord{}
		n := per
		if i == 0 {
			n += format.MaxBatchHeaders - per*format.MaxBatchRecords
		}
		for range n {
			r.Headers = append(r.Headers, &strandv1.Header{})
		}
		empty.Records = append(empty.Records, r)
	}
	// The same with one-byte names, and a 1 MiB body: ordinary shapes.
	named := proto.Clone(empty).(*strandv1.AppendRequest)
	for _, r := range named.Records {
		for _, h := range r.Headers {
			h.Name = []byte("h")
		}
	}
	body := &strandv1.AppendRequest{Stream: "s", Records: []*strandv1.AppendRecord{{Body: make([]byte, 1<<20-64)}}}
	pb := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	js := func(m proto.Message) []byte {
		b, err := protojson.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	raw := func(m proto.Message) []byte {
		b, err := rawjson.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// A record of as many (ignored) members as the codec allows.
	members := func(n int, body string) []byte {
		var b strings.Builder
		b.WriteString(`{"stream":"s","records":[{"body":"` + body + `"`)
		for i := range n - 3 {
			fmt.Fprintf(&b, `,"k%d":0`, i)
		}
		b.WriteString(`}]}`)
		return []byte(b.String())
	}
	pc, jc, rc := protoCodec{lazy: true}, jsonCodec{name: "json", lazy: true}, jsonCodec{name: rawjson.Name, raw: true, lazy: true}
	return map[string]struct {
		codec connect.Codec
		b     []byte
	}{
		"proto/empty-headers": {pc, pb(empty)},
		"proto/named-headers": {pc, pb(named)},
		"proto/body":          {pc, pb(body)},
		"json/empty-headers":  {jc, js(empty)},
		"json/named-headers":  {jc, js(named)},
		"json/members":        {jc, members(maxJSONMembers, "eA==")},
		"json/body":           {jc, js(body)},
		"raw/empty-headers":   {rc, raw(empty)},
		"raw/named-headers":   {rc, raw(named)},
		"raw/members":         {rc, members(maxRawMembers, "x")},
		"raw/body":            {rc, raw(body)},
	}
}

// TestDecodedBoundHolds measures, for each codec's worst shapes, what
// reading and decoding one append allocates against what the decoding
// budget was charged for it: its encoded bytes before they are read, then
// decodedBound before it is decoded. It fails when the allocation exceeds
// the charge by more than maxChargeExcess, so the budget
// (Limits.MaxDecodingBytes) bounds the memory of appends being decoded at
// once. (With the encoded bytes alone charged, as before, the expansion
// logged here is the excess: up to 37x for raw JSON.)
func TestDecodedBoundHolds(t *testing.T) {
	shapes := appendShapes(t)
	for _, name := range slices.Sorted(maps.Keys(shapes)) {
		c := shapes[name]
		var h countingHeld
		ctx := context.WithValue(context.Background(), budgetKey{}, held(&h))
		var m *strandv1.AppendRequest
		var err error
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		m = &strandv1.AppendRequest{}
		if err = c.codec.Unmarshal(c.b, m); err == nil {
			err = decodeAppend(ctx, m)
		}
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if m.GetStream() != "s" || len(m.GetRecords()) == 0 {
			t.Fatalf("%s: decoded %d records of stream %q", name, len(m.GetRecords()), m.GetStream())
		}
		alloc := int64(after.TotalAlloc - before.TotalAlloc)
		charged := int64(len(c.b)) + h.n
		t.Logf("%-20s %8d bytes encoded, %6.2f MiB allocated (%5.1fx encoded), %6.2f MiB charged (%.2fx of it allocated)",
			name, len(c.b), float64(alloc)/(1<<20), float64(alloc)/float64(len(c.b)), float64(charged)/(1<<20), float64(alloc)/float64(charged))
		if float64(alloc) > maxChargeExcess*float64(charged) {
			t.Errorf("%s: decoding allocated %d bytes, %.2fx the %d charged to the decoding budget (at most %.2fx)",
				name, alloc, float64(alloc)/float64(charged), charged, maxChargeExcess)
		}
	}
}

// maxInFlightExcess is the stated factor for appends being decoded at
// once: their allocation stays within it times the server's budget.
const maxInFlightExcess = 3.0

// TestInFlightDecodingBounded holds the memory of appends being decoded at
// once to maxInFlightExcess times the default budget, for each shape:
// as many calls as their charges (capped at a tenant's half by
// budget.fit) fit in DefaultMaxDecodingBytes, times what each allocates.
func TestInFlightDecodingBounded(t *testing.T) {
	shapes := appendShapes(t)
	for _, name := range slices.Sorted(maps.Keys(shapes)) {
		c := shapes[name]
		b := &budget{max: DefaultMaxDecodingBytes, held: map[string]int64{}}
		var alloc int64
		var calls []*share
		for i := 0; ; i++ {
			h := &share{b: b, tenant: fmt.Sprint("tenant-", i%2)}
			if b.take(h.tenant, int64(len(c.b))) != nil {
				break
			}
			h.n = int64(len(c.b))
			calls = append(calls, h)
			ctx := context.WithValue(context.Background(), budgetKey{}, held(h))
			m := &strandv1.AppendRequest{}
			if err := c.codec.Unmarshal(c.b, m); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if i == 0 { // measure one; the rest allocate alike
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				err := decodeAppend(ctx, m)
				runtime.ReadMemStats(&after)
				if err != nil {
					t.Fatalf("%s: the first call: %v", name, err)
				}
				alloc = int64(after.TotalAlloc-before.TotalAlloc) + int64(len(c.b)) // and its stash
				continue
			}
			if err := decodeAppend(ctx, m); err != nil {
				if connect.CodeOf(err) != connect.CodeResourceExhausted || !errors.Is(err, ErrBusy) {
					t.Fatalf("%s: call %d refused %v, want ResourceExhausted (ErrBusy)", name, i, err)
				}
				break
			}
		}
		inFlight := int64(len(calls)) * alloc
		t.Logf("%-20s %3d at once, %7.2f MiB in flight (%.2fx the %d MiB budget)", name, len(calls), float64(inFlight)/(1<<20), float64(inFlight)/DefaultMaxDecodingBytes, DefaultMaxDecodingBytes>>20)
		if len(calls) == 0 {
			t.Errorf("%s: a legal append was refused by an empty budget", name)
		}
		if float64(inFlight) > maxInFlightExcess*DefaultMaxDecodingBytes {
			t.Errorf("%s: %d appends decoding at once allocate %d MiB, %.2fx the %d MiB budget (at most %.1fx)",
				name, len(calls), inFlight>>20, float64(inFlight)/DefaultMaxDecodingBytes, DefaultMaxDecodingBytes>>20, maxInFlightExcess)
		}
		for _, h := range calls {
			h.done()
		}
		if b.cur != 0 {
			t.Errorf("%s: %d bytes of the budget not given back", name, b.cur)
		}
	}
}

// FuzzDecodeAppend: a stashed append decodes as the codec decodes it at
// once (the same message, unknown fields included, so no stash is left
// in it; or an error both ways), and its charge is at least its size.
func FuzzDecodeAppend(f *testing.F) {
	f.Add(byte(0), []byte{0x0a, 0x01, 's', 0x12, 0x02, 0x12, 0x00})
	f.Add(byte(1), []byte(`{"stream":"s","records":[{"headers":[{}]}]}`))
	f.Add(byte(2), []byte(`{"stream":"s","records":[{"body":"x","headers":[{"name":"h"}]}]}`))
	f.Add(byte(1), []byte(`[`))
	f.Fuzz(func(t *testing.T, k byte, b []byte) {
		codecs := []struct{ now, lazy connect.Codec }{
			{protoCodec{}, protoCodec{lazy: true}},
			{jsonCodec{name: "json"}, jsonCodec{name: "json", lazy: true}},
			{jsonCodec{name: rawjson.Name, raw: true}, jsonCodec{name: rawjson.Name, raw: true, lazy: true}},
		}
		c := codecs[int(k)%len(codecs)]
		want := &strandv1.AppendRequest{}
		errNow := c.now.Unmarshal(b, want)
		var h countingHeld
		ctx := context.WithValue(context.Background(), budgetKey{}, held(&h))
		got := &strandv1.AppendRequest{}
		err := c.lazy.Unmarshal(b, got)
		if err == nil {
			err = decodeAppend(ctx, got)
			if h.n < int64(len(b)) {
				t.Errorf("charged %d for %d bytes", h.n, len(b))
			}
		}
		if (err == nil) != (errNow == nil) {
			t.Fatalf("stashed: %v; at once: %v", err, errNow)
		}
		if err == nil && !proto.Equal(got, want) {
			t.Fatalf("stashed decoded %v, at once %v", got, want)
		}
	})
}
