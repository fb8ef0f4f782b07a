package server

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/rawjson"
)

// stashed is b as the server's lazy codec c leaves it: counted and
// stashed, not decoded.
func stashed(t testing.TB, c connect.Codec, b []byte) *strandv1.AppendRequest {
	t.Helper()
	m := &strandv1.AppendRequest{}
	if err := c.Unmarshal(b, m); err != nil {
		t.Fatalf("%s codec: %v", c.Name(), err)
	}
	return m
}

// TestForeignAppendNotDecoded (authorize before spend): an append to a
// stream outside the token's scope is refused as PermissionDenied before
// it is decoded: no share of the decoding budget is taken for it and its
// bytes stay stashed, for each codec's worst shape. It failed before:
// the handler decoded the append (taking decodedBound of the budget, up
// to tens of MiB for raw JSON) and only then authorized its stream.
func TestForeignAppendNotDecoded(t *testing.T) {
	s := &Server{cfg: Config{Auth: &auth.Checker{}}}
	grant := auth.Grant{Ops: []auth.Op{auth.Append}, Prefix: "mine/", Hash: "h", Tenant: "h"}
	shapes := appendShapes(t) // every shape names stream "s", outside "mine/"
	for _, name := range slices.Sorted(maps.Keys(shapes)) {
		c := shapes[name]
		var h countingHeld
		ctx := context.WithValue(auth.WithGrant(context.Background(), grant), budgetKey{}, held(&h))
		m := stashed(t, c.codec, c.b)
		_, err := s.Append(ctx, connect.NewRequest(m))
		if connect.CodeOf(err) != connect.CodePermissionDenied || !errors.Is(err, auth.ErrDenied) {
			t.Errorf("%s: %v, want permission_denied", name, err)
		}
		if h.n != 0 || len(m.GetRecords()) != 0 || len(m.ProtoReflect().GetUnknown()) != 1+len(c.b) {
			t.Errorf("%s: refused after decoding: %d bytes of the budget taken, %d records decoded", name, h.n, len(m.GetRecords()))
		}
	}
}

// TestStashedStream: the stream read from an append's encoded bytes
// before it is decoded, for the shapes the decoders accept, and the
// malformed ones refused with ErrMalformedAppend.
func TestStashedStream(t *testing.T) {
	pc, jc, rc := protoCodec{lazy: true}, jsonCodec{name: "json", lazy: true}, jsonCodec{name: rawjson.Name, raw: true, lazy: true}
	pb := func(m *strandv1.AppendRequest) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	rec := []*strandv1.AppendRecord{{Body: []byte("x")}}
	// Two stream fields: proto.Unmarshal keeps the last.
	twice := append(pb(&strandv1.AppendRequest{Stream: "first", Records: rec}), pb(&strandv1.AppendRequest{Stream: "last"})...)
	// A field 1 of the varint wire type: unknown to proto.Unmarshal.
	varint := protowire.AppendVarint(protowire.AppendTag(pb(&strandv1.AppendRequest{Stream: "s"}), 1, protowire.VarintType), 7)
	for _, tc := range []struct {
		name  string
		codec connect.Codec
		b     string
		want  string
		bad   bool
	}{
		{"proto", pc, string(pb(&strandv1.AppendRequest{Stream: "a/b", Records: rec})), "a/b", false},
		{"proto/after records", pc, string(append(pb(&strandv1.AppendRequest{Records: rec}), pb(&strandv1.AppendRequest{Stream: "late"})...)), "late", false},
		{"proto/twice", pc, string(twice), "last", false},
		{"proto/varint field 1", pc, string(varint), "s", false},
		{"proto/none", pc, string(pb(&strandv1.AppendRequest{Records: rec})), "", false},
		{"proto/cut short", pc, string(pb(&strandv1.AppendRequest{Stream: "s", Records: rec})[:5]), "", true},
		{"json", jc, `{"records":[{"body":"eA==","stream":"inner"}], "stream" : "a/b"}`, "a/b", false},
		{"json/escaped key", jc, `{"str\u0065am":"a\u002fb"}`, "a/b", false},
		{"json/null", jc, `{"stream":null}`, "", false},
		{"json/empty", jc, ` {} `, "", false},
		{"json/nested quotes", jc, `{"records":[{"body":"\"}]{["}],"stream":"s"}`, "s", false},
		{"json/number", jc, `{"stream":5}`, "", true},
		{"json/array", jc, `[{"stream":"s"}]`, "", true},
		{"json/cut short", jc, `{"stream":"s"`, "", true},
		{"json/no colon", jc, `{"stream" "s"}`, "", true},
		{"raw", rc, `{"stream":"a/b","records":[{"body":"x"}]}`, "a/b", false},
		{"raw/twice", rc, `{"stream":"first","stream":"last"}`, "last", false},
	} {
		got, err := stashedStream(stashed(t, tc.codec, []byte(tc.b)))
		if tc.bad {
			if !errors.Is(err, ErrMalformedAppend) {
				t.Errorf("%s: %q, %v; want ErrMalformedAppend", tc.name, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

// FuzzStashedStream: for every message a codec decodes, the stream read
// before decoding (stashedStream, which authorization uses) is the
// stream decoded, so the check before decoding and the one after name
// the same stream.
func FuzzStashedStream(f *testing.F) {
	f.Add([]byte(`{"stream":"s","records":[{"body":"aGk="}]}`))
	f.Add([]byte(`{"records":[{"body":"aGk=","headers":[{"name":"c3RyZWFt"}]}],"str\u0065am":"t"}`))
	f.Add([]byte(`{"stream":"a","stream":"b"}`))
	f.Add([]byte(`{"stream":null,"matchSeqNum":"3"}`))
	m, _ := proto.Marshal(&strandv1.AppendRequest{Stream: "x", Records: []*strandv1.AppendRecord{{Body: []byte("b")}}})
	f.Add(m)
	f.Add(append(m, m...))
	codecs := []struct {
		lazy, eager connect.Codec
	}{
		{protoCodec{lazy: true}, protoCodec{}},
		{jsonCodec{name: "json", lazy: true}, jsonCodec{name: "json"}},
		{jsonCodec{name: rawjson.Name, raw: true, lazy: true}, jsonCodec{name: rawjson.Name, raw: true}},
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, c := range codecs {
			var dec strandv1.AppendRequest
			if c.eager.Unmarshal(b, &dec) != nil {
				continue
			}
			got, err := stashedStream(stashed(t, c.lazy, b))
			if err != nil || got != dec.GetStream() {
				t.Fatalf("%s: %q decodes with stream %q, read before decoding as %q (%v)", c.lazy.Name(), b, dec.GetStream(), got, err)
			}
		}
	})
}
