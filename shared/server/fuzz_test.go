package server_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/server"
)

// decode decodes data as protobuf or, failing that, JSON, as the server does
// for each content type.
func decode(data []byte, m proto.Message) bool {
	if proto.Unmarshal(data, m) == nil {
		return true
	}
	proto.Reset(m)
	return protojson.Unmarshal(data, m) == nil
}

func wantInvalid(t *testing.T, err error) {
	if err != nil && connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("error %v has code %v, want invalid_argument", err, connect.CodeOf(err))
	}
}

func FuzzAppendRequest(f *testing.F) {
	f.Add([]byte(`{"stream":"s","records":[{"body":"aGk="}]}`))
	f.Add([]byte(`{"stream":"s","records":[{"headers":[{"name":"","value":"dg=="}]}],"matchSeqNum":"3"}`))
	f.Add([]byte(`{"stream":"","records":[]}`))
	m, _ := proto.Marshal(&strandv1.AppendRequest{Stream: "x", Records: []*strandv1.AppendRecord{{TimestampMs: -1, Body: []byte("b")}}})
	f.Add(m)
	f.Fuzz(func(t *testing.T, data []byte) {
		var req strandv1.AppendRequest
		if !decode(data, &req) {
			return
		}
		a, err := server.ParseAppend(&req)
		wantInvalid(t, err)
		if err == nil && (len(a.Records) == 0 || len(a.Records) > 1000 || a.Stream == "") {
			t.Fatalf("accepted %d records for %q", len(a.Records), a.Stream)
		}
	})
}

func FuzzReadRequest(f *testing.F) {
	f.Add([]byte(`{"stream":"s","seqNum":"5","count":10}`))
	f.Add([]byte(`{"stream":"s","timestampMs":"-1"}`))
	f.Add([]byte(`{"stream":"s","tailOffset":"18446744073709551615","bytes":"99999999"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var req strandv1.ReadRequest
		if decode(data, &req) {
			r, err := server.ParseRead(&req)
			wantInvalid(t, err)
			if err == nil && (r.Limits.Count > 1000 || r.Limits.Bytes > 1<<20 || r.Limits.Count < 0) {
				t.Fatalf("limits %+v", r.Limits)
			}
		}
		var sreq strandv1.ReadSessionRequest
		if decode(data, &sreq) {
			_, err := server.ParseReadSession(&sreq, time.Second)
			wantInvalid(t, err)
		}
	})
}
