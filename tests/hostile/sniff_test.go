package hostile

import (
	"bytes"
	"compress/gzip"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/api/strandv1/strandv1connect"
	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/rawjson"
)

// beforeBodyBound is what a refused foreign Append may make the server
// allocate whatever its size: the 64 KiB read before the stream check
// (inflated, for gzip), a gzip reader, the answer and the HTTP plumbing.
const beforeBodyBound = 1 << 20

// largestEncoded is largestHeaders(stream) and its protobuf and JSON.
func largestEncoded(t *testing.T, stream string) (big *strandv1.AppendRequest, pb, js []byte) {
	big = largestHeaders(stream)
	pb, err := proto.Marshal(big)
	if err != nil {
		t.Fatal(err)
	}
	js, err = protojson.Marshal(big)
	if err != nil {
		t.Fatal(err)
	}
	return big, pb, js
}

func gzipped(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestForeignAppendRefusedBeforeBody (ADR 0074, authorize before spend):
// the largest Append, as JSON, raw JSON and protobuf, plain and gzipped,
// from a token scoped to other streams is refused permission_denied after
// the server read 64 KiB of its message, and the server allocates less
// than 1 MiB for it; so is one from a token without the append operation
// (before any of the body). It failed before: Connect read (and inflated)
// the whole message before the stream check of ADR 0070, 10.5 MiB
// allocated for the JSON, raw JSON and gzipped JSON (7.8 KB inflating to
// 2.4 MB), 5.4 MiB for the protobuf, plain or gzipped.
func TestForeignAppendRefusedBeforeBody(t *testing.T) {
	e := newEnv(t, nil)
	stream := e.w.Streams[0].Name
	foreign := e.api.Issue(t, 22, "elsewhere/", auth.Append)
	reader := e.api.Issue(t, 23, "", auth.Read)
	_, pb, js := largestEncoded(t, stream)
	for _, tc := range []struct {
		name, ctype string
		body        []byte
		gzip        bool
	}{
		{"JSON", "application/json", js, false},
		{"gzipped JSON", "application/json", gzipped(t, js), true},
		{"raw JSON", "application/" + rawjson.Name, js, false},
		{"protobuf", "application/proto", pb, false},
		{"gzipped protobuf", "application/proto", gzipped(t, pb), true},
	} {
		for _, who := range []struct{ name, token string }{{"a foreign token", foreign}, {"a read-only token", reader}} {
			var code string
			got := allocated(func() {
				code = e.send(t, strandv1connect.StrandServiceAppendProcedure, who.token, tc.ctype, bytes.NewReader(tc.body), tc.gzip)
			})
			t.Logf("%s, %s (%d bytes): %s, %d KiB allocated", who.name, tc.name, len(tc.body), code, got>>10)
			if code != "permission_denied" || got > beforeBodyBound {
				t.Errorf("%s, %s (%d bytes): code %q, %d KiB allocated; want permission_denied within %d KiB", who.name, tc.name, len(tc.body), code, got>>10, beforeBodyBound>>10)
			}
		}
	}
}
