package rawjson_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/rawjson"
)

func TestMarshal(t *testing.T) {
	u := func(v uint64) *uint64 { return &v }
	for _, tc := range []struct {
		name string
		m    proto.Message
		want string
	}{
		{"seq 0, empty body, no headers: all present",
			&strandv1.SequencedRecord{},
			`{"seqNum":0,"timestampMs":0,"headers":[],"body":""}`},
		{"text",
			&strandv1.SequencedRecord{SeqNum: 2, TimestampMs: 1700000000000, Headers: []*strandv1.Header{{Name: []byte("k"), Value: []byte("v \"q\"")}}, Body: []byte("héllo\n")},
			`{"seqNum":2,"timestampMs":1700000000000,"headers":[{"name":"k","value":"v \"q\""}],"body":"héllo\n"}`},
		{"bytes that are not UTF-8 are base64 in FBase64",
			&strandv1.SequencedRecord{SeqNum: 1, Headers: []*strandv1.Header{{Name: []byte("k"), Value: []byte{0xff}}}, Body: []byte{0xfe, 0x00}},
			`{"seqNum":1,"timestampMs":0,"headers":[{"name":"k","valueBase64":"/w=="}],"bodyBase64":"/gA="}`},
		{"64-bit numbers are numbers; unset optional omitted",
			&strandv1.AppendRequest{Stream: "s"},
			`{"stream":"s","records":[],"producerId":"","fencingToken":""}`},
		{"optional set",
			&strandv1.AppendRequest{Stream: "s", MatchSeqNum: u(0)},
			`{"stream":"s","records":[],"matchSeqNum":0,"producerId":"","fencingToken":""}`},
		{"enum by name",
			&strandv1.CreateStreamRequest{Name: "n", StorageClass: strandv1.StorageClass_STORAGE_CLASS_EXPRESS},
			`{"name":"n","storageClass":"STORAGE_CLASS_EXPRESS","retentionMs":0}`},
		{"max uint64 exact",
			&strandv1.CheckTailResponse{NextSeqNum: 1<<64 - 1, LastTimestampMs: -1},
			`{"nextSeqNum":18446744073709551615,"lastTimestampMs":-1,"trimSeqNum":0,"fenced":false}`},
	} {
		got, err := rawjson.Marshal(tc.m)
		if err != nil || string(got) != tc.want {
			t.Errorf("%s:\n got %s %v\nwant %s", tc.name, got, err, tc.want)
		}
	}
}

func TestUnmarshal(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     proto.Message
		err      bool
	}{
		{"text body and headers",
			`{"stream":"s","records":[{"timestampMs":5,"headers":[{"name":"k","value":"v"}],"body":"fifth"}]}`,
			&strandv1.AppendRequest{Stream: "s", Records: []*strandv1.AppendRecord{{TimestampMs: 5, Headers: []*strandv1.Header{{Name: []byte("k"), Value: []byte("v")}}, Body: []byte("fifth")}}}, false},
		{"base64 beside",
			`{"stream":"s","records":[{"bodyBase64":"/gA=","headers":[{"nameBase64":"aw==","value":""}]}]}`,
			&strandv1.AppendRequest{Stream: "s", Records: []*strandv1.AppendRecord{{Headers: []*strandv1.Header{{Name: []byte("k"), Value: []byte{}}}, Body: []byte{0xfe, 0}}}}, false},
		{"proto names and string numbers, unknown fields",
			`{"stream":"s","match_seq_num":"3","records":[{"body":"x","extra":1}],"zzz":true}`,
			&strandv1.AppendRequest{Stream: "s", MatchSeqNum: proto.Uint64(3), Records: []*strandv1.AppendRecord{{Body: []byte("x")}}}, false},
		{"body is a number", `{"stream":"s","records":[{"body":1}]}`, nil, true},
		{"both body and bodyBase64", `{"stream":"s","records":[{"body":"a","bodyBase64":"YQ=="}]}`, nil, true},
		{"bad base64", `{"stream":"s","records":[{"bodyBase64":"!!"}]}`, nil, true},
		{"not JSON", `{"stream":`, nil, true},
		{"trailing data", `{} {}`, nil, true},
		{"records not a list", `{"records":{"body":"a"}}`, nil, true},
	} {
		got := &strandv1.AppendRequest{}
		err := rawjson.Unmarshal([]byte(tc.in), got)
		switch {
		case tc.err && !errors.Is(err, rawjson.ErrInvalid):
			t.Errorf("%s: %v, want ErrInvalid", tc.name, err)
		case !tc.err && (err != nil || !proto.Equal(got, tc.want)):
			t.Errorf("%s: %v %v, want %v", tc.name, got, err, tc.want)
		}
	}
}

// TestRoundTrip: what Marshal writes, Unmarshal reads back equal, and it
// is protojson once bytes are base64 and numbers strings.
func TestRoundTrip(t *testing.T) {
	m := &strandv1.ReadResponse{NextSeqNum: 3, LastTimestampMs: 9, Records: []*strandv1.SequencedRecord{
		{SeqNum: 0, Body: []byte("text")}, {SeqNum: 1, Body: []byte{0xff}, Headers: []*strandv1.Header{{Name: []byte("n"), Value: []byte{}}}}}}
	b, err := rawjson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	back := &strandv1.ReadResponse{}
	if err := rawjson.Unmarshal(b, back); err != nil || !proto.Equal(m, back) {
		t.Fatalf("%s -> %v %v", b, back, err)
	}
	pj, _ := protojson.Marshal(m)
	fromPJ := &strandv1.ReadResponse{}
	if err := protojson.Unmarshal(pj, fromPJ); err != nil || !proto.Equal(fromPJ, back) {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"seqNum":0`) {
		t.Fatalf("seq 0 missing: %s", b)
	}
}

// FuzzUnmarshal: no input panics; what decodes re-encodes and decodes
// equal.
func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte(`{"stream":"s","records":[{"body":"a","headers":[{"name":"k","valueBase64":"/w=="}]}]}`))
	f.Add([]byte(`{"records":[{"bodyBase64":"/gA="}],"matchSeqNum":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m := &strandv1.AppendRequest{}
		if err := rawjson.Unmarshal(b, m); err != nil {
			if !errors.Is(err, rawjson.ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		out, err := rawjson.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		back := &strandv1.AppendRequest{}
		if err := rawjson.Unmarshal(out, back); err != nil || !proto.Equal(m, back) {
			t.Fatalf("%s -> %s -> %v %v", b, out, back, err)
		}
	})
}
