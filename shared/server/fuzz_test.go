package server_test

import (
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/server"
	"github.com/strandlog/strand/shared/star"
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
	f.Add([]byte(`{"stream":"s","records":[{"body":"aGk="}],"fencingToken":"w1"}`))
	m, _ := proto.Marshal(&strandv1.AppendRequest{Stream: "x", Records: []*strandv1.AppendRecord{{TimestampMs: -1, Body: []byte("b")}}})
	f.Add(m)
	f.Fuzz(func(t *testing.T, data []byte) {
		var req strandv1.AppendRequest
		if !decode(data, &req) {
			return
		}
		a, err := server.ParseAppend(&req)
		wantInvalid(t, err)
		if err == nil && (len(a.Records) == 0 || len(a.Records) > 1000 || a.Stream == "" || len(a.FenceToken) > 36) {
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

func FuzzTokenRequests(f *testing.F) {
	f.Add([]byte(`{"prefix":"team-a/","ops":["read","append"],"description":"ci"}`))
	f.Add([]byte(`{"prefix":"","ops":["ADMIN"," read "]}`))
	f.Add([]byte(`{"prefix":"a\u0000","ops":["write",""]}`))
	f.Add([]byte(`{"hash":"` + strings.Repeat("ab", 32) + `"}`))
	f.Add([]byte(`{"hash":"strand_` + strings.Repeat("a", 52) + `"}`))
	m, _ := proto.Marshal(&strandv1.CreateTokenRequest{Prefix: "p/", Ops: []string{"read,append"}, Description: strings.Repeat("d", 300)})
	f.Add(m)
	f.Add([]byte(`{"prefix":"t/","ops":["admin"],"tenant":true,"maxStreams":"5","appendBytesPerSec":"-1"}`))
	f.Add([]byte(`{"prefix":"t/","ops":["admin"],"maxStreams":"5"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c strandv1.CreateTokenRequest
		if decode(data, &c) {
			a, err := server.ParseCreateToken(&c)
			wantInvalid(t, err)
			if err == nil {
				if len(a.Ops) == 0 || len(a.Description) > 256 || (a.Prefix != "" && metastore.ValidateStreamName(a.Prefix) != nil) ||
					a.MaxStreams < 0 || a.AppendBytesPerSec < 0 || (!a.Tenant && (a.MaxStreams != 0 || a.AppendBytesPerSec != 0)) {
					t.Fatalf("accepted %+v", a)
				}
				for _, op := range a.Ops {
					if op != auth.Read && op != auth.Append && op != auth.Trim && op != auth.Fence && op != auth.Admin {
						t.Fatalf("accepted op %q", op)
					}
				}
			}
		}
		var r strandv1.RevokeTokenRequest
		if decode(data, &r) {
			h, err := server.ParseRevokeToken(&r)
			wantInvalid(t, err)
			if err == nil && metastore.ValidateTokenHash(h) != nil {
				t.Fatalf("accepted hash %q", h)
			}
		}
		var l strandv1.ListTokensRequest
		if decode(data, &l) {
			_, err := server.ParseListTokens(&l)
			wantInvalid(t, err)
		}
	})
}

func FuzzFenceRequest(f *testing.F) {
	f.Add([]byte(`{"stream":"s","token":"w1"}`))
	f.Add([]byte(`{"stream":"s","token":"","currentToken":"w1","matchSeqNum":"3"}`))
	f.Add([]byte(`{"stream":"s","token":"0123456789012345678901234567890123456"}`))
	f.Add([]byte(`{"stream":"s","token":"\u0000move\u0000star-1"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var req strandv1.FenceRequest
		if !decode(data, &req) {
			return
		}
		a, err := server.ParseFence(&req)
		wantInvalid(t, err)
		if err == nil && (a.Stream == "" || len(a.Token) > 36 || (a.CurrentToken != nil && len(*a.CurrentToken) > 36) || strings.HasPrefix(a.Token, star.MovePrefix)) {
			t.Fatalf("accepted %+v", a)
		}
	})
}

func FuzzTrimRequest(f *testing.F) {
	f.Add([]byte(`{"stream":"s","trimSeqNum":"5"}`))
	f.Add([]byte(`{"stream":"s","trimSeqNum":"18446744073709551615","fencingToken":"w","matchSeqNum":"1"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var req strandv1.TrimRequest
		if !decode(data, &req) {
			return
		}
		a, err := server.ParseTrim(&req)
		wantInvalid(t, err)
		if err == nil && (a.Stream == "" || len(a.Options.FenceToken) > 36 || a.TrimSeq != req.TrimSeqNum) {
			t.Fatalf("accepted %+v", a)
		}
	})
}

func FuzzReconfigureStreamRequest(f *testing.F) {
	f.Add([]byte(`{"name":"s","retentionMs":"86400000"}`))
	f.Add([]byte(`{"name":"s","timestampingMode":"TIMESTAMPING_MODE_ARRIVAL","uncapped":true}`))
	f.Add([]byte(`{"name":"s","retentionMs":"-1","timestampingMode":7}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var req strandv1.ReconfigureStreamRequest
		if !decode(data, &req) {
			return
		}
		a, err := server.ParseReconfigure(&req)
		wantInvalid(t, err)
		if err != nil {
			return
		}
		p := a.Patch
		if a.Name == "" || (p.RetentionMs == nil && p.TimestampMode == nil && p.Uncapped == nil) || (p.RetentionMs != nil && *p.RetentionMs < 0) || (p.TimestampMode != nil && *p.TimestampMode > 2) {
			t.Fatalf("accepted %+v", a)
		}
	})
}

// FuzzMoveStreamRequest: ParseMove accepts only a valid stream name and a
// star id that fits a move token, and refuses the rest as
// invalid_argument.
func FuzzMoveStreamRequest(f *testing.F) {
	f.Add([]byte(`{"stream":"s","toStar":"star-1"}`))
	f.Add([]byte(`{"stream":"s","toStar":""}`))
	f.Add([]byte(`{"stream":"s","toStar":"star 1\u0000"}`))
	f.Add([]byte(`{"stream":"","toStar":"` + strings.Repeat("x", 40) + `"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var req strandv1.MoveStreamRequest
		if !decode(data, &req) {
			return
		}
		a, err := server.ParseMove(&req)
		wantInvalid(t, err)
		if err == nil && (a.Stream == "" || a.To == "" || len(a.To) > star.MaxMoveTarget || strings.ContainsAny(a.To, " \x00")) {
			t.Fatalf("accepted %+v", a)
		}
	})
}
