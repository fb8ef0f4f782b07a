package server_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/server"
)

// counts are the records and headers of m.
func counts(m *strandv1.AppendRequest) (recs, hdrs int) {
	for _, r := range m.Records {
		hdrs += len(r.GetHeaders())
	}
	return len(m.Records), hdrs
}

// FuzzCountAppendProto: the count check refuses exactly the decodable
// messages over a batch's record or header limit (and refusal is
// ErrTooManyElements); it never refuses a message within them.
func FuzzCountAppendProto(f *testing.F) {
	ok, _ := proto.Marshal(&strandv1.AppendRequest{Stream: "s", Records: []*strandv1.AppendRecord{{Body: []byte("b"), Headers: []*strandv1.Header{{Name: []byte("h")}}}}})
	f.Add(ok)
	f.Add(append([]byte{0x0a, 1, 's'}, strings.Repeat("\x12\x00", format.MaxBatchRecords+1)...))
	f.Add(append([]byte{0x0a, 1, 's'}, strings.Repeat("\x12\x00", format.MaxBatchRecords)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		err := server.CountAppendProto(b)
		if err != nil && !errors.Is(err, server.ErrTooManyElements) {
			t.Fatalf("error %v is not ErrTooManyElements", err)
		}
		var m strandv1.AppendRequest
		if proto.Unmarshal(b, &m) != nil {
			return
		}
		recs, hdrs := counts(&m)
		over := recs > format.MaxBatchRecords || hdrs > format.MaxBatchHeaders
		if over != (err != nil) {
			t.Fatalf("%d records, %d headers: count check says %v", recs, hdrs, err)
		}
	})
}

// FuzzCountJSON: a JSON append the count check passes decodes to at most
// its bound of records and headers; one within a batch's limits passes.
func FuzzCountJSON(f *testing.F) {
	f.Add([]byte(`{"stream":"s","records":[{"body":"aGk=","headers":[{"name":"aA=="}]}]}`), 3)
	f.Add([]byte(`{"stream":"s","records":[{},{},{}]}`), 2)
	f.Add([]byte(`{"stream":"s\"[,,,","records":[ ]}`), 0)
	f.Fuzz(func(t *testing.T, b []byte, max int) {
		max = max&0xff + 0
		err := server.CountJSON(b, max)
		if err != nil && !errors.Is(err, server.ErrTooManyElements) {
			t.Fatalf("error %v is not ErrTooManyElements", err)
		}
		var m strandv1.AppendRequest
		if protojson.Unmarshal(b, &m) != nil {
			return
		}
		recs, hdrs := counts(&m)
		if err == nil && recs+hdrs > max {
			t.Fatalf("%d records and %d headers passed a bound of %d", recs, hdrs, max)
		}
		if err != nil && recs+hdrs <= max && strings.Count(string(b), "[") <= 2 && !strings.Contains(string(b), `\`) {
			t.Fatalf("%d records and %d headers refused under a bound of %d: %v", recs, hdrs, max, err)
		}
	})
}

// TestCountJSONStrings: brackets and commas inside strings (escaped quotes
// too) are not counted.
func TestCountJSONStrings(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		fail bool
	}{
		{`{"stream":"[,,,]","records":[{}]}`, 1, false},
		{`{"stream":"\"[,,,]","records":[{}]}`, 1, false},
		{`{"records":[{},{}]}`, 1, true},
		{`{"records":[ ]}`, 0, false},
		{strings.Repeat("[", 40), 100, true}, // too deep
		{`{"stream":"a:b:c","records":[{"body":"x:y"}]}`, 1, false},
		{"{" + strings.Repeat(`"k":0,`, 300_000) + `"k":0}`, 1, true}, // too many members
	} {
		if err := server.CountJSON([]byte(tc.in), tc.max); (err != nil) != tc.fail {
			t.Errorf("%s (max %d): %v", tc.in, tc.max, err)
		}
	}
}
