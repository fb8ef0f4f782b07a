package hostile

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1/strandv1connect"
	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/client"
)

// foreignBound is what a refused foreign append may make the server
// allocate beyond its body: reading the body (its buffer grows by
// doubling), the stash's copy, the answer. Decoding the same appends
// allocates 10 to 12 times their size.
const foreignBound = 4

// TestForeignScopeAppendNotDecoded (authorize before spend): a token
// scoped to other streams that sends the largest append (protobuf, JSON,
// or one AppendSession message) to a stream outside its scope is refused
// with permission_denied, and the server allocates at most a few times
// the body's bytes for it: the stream is read from the encoded bytes and
// authorized before anything is decoded. It failed before: the append was
// decoded first (15 MiB for the 1.3 MB protobuf, 24 MiB for the 2.4 MB
// JSON), then refused.
func TestForeignScopeAppendNotDecoded(t *testing.T) {
	e := newEnv(t, nil)
	stream := e.w.Streams[0].Name
	foreign := e.api.Issue(t, 21, "elsewhere/", auth.Append)
	big, pb, js := largestEncoded(t, stream)
	for _, tc := range []struct {
		name, ctype string
		body        []byte
	}{
		{"protobuf", "application/proto", pb},
		{"JSON", "application/json", js},
	} {
		var code string
		got := allocated(func() { code = e.postType(t, strandv1connect.StrandServiceAppendProcedure, foreign, tc.ctype, tc.body) })
		t.Logf("a foreign append, %s (%d bytes): %d MiB allocated", tc.name, len(tc.body), got>>20)
		if code != "permission_denied" || got > foreignBound*uint64(len(tc.body))+(2<<20) {
			t.Errorf("a foreign append, %s (%d bytes): code %q, %d MiB allocated (want permission_denied within %dx its size)", tc.name, len(tc.body), code, got>>20, foreignBound)
		}
	}

	c := strandv1connect.NewStrandServiceClient(client.NewHTTPClient(), e.ts.URL, connect.WithGRPC())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var err2 error
	got := allocated(func() {
		s := c.AppendSession(ctx)
		s.RequestHeader().Set("Authorization", "Bearer "+foreign)
		_ = s.Send(big)
		_ = s.CloseRequest()
		_, err2 = s.Receive()
		_ = s.CloseResponse()
	})
	// The client's own encoding of the message is counted too.
	t.Logf("a foreign AppendSession message (%d bytes): %d MiB allocated, the client's encoding included", len(pb), got>>20)
	if connect.CodeOf(err2) != connect.CodePermissionDenied || got > (foreignBound+2)*uint64(len(pb))+(2<<20) {
		t.Errorf("a foreign AppendSession message: %v, %d MiB allocated (want permission_denied within %dx its size)", err2, got>>20, foreignBound+2)
	}
}
