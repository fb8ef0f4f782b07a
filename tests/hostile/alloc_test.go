package hostile

import (
	"context"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/api/strandv1/strandv1connect"
	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/format"
)

// largestHeaders is the append of the largest JSON: 1000 records holding
// the batch's 65,535 one-byte headers (with empty values: the most JSON per
// metered byte), the rest of the metered bytes in bodies.
func largestHeaders(stream string) *strandv1.AppendRequest {
	m := &strandv1.AppendRequest{Stream: stream}
	per := format.MaxBatchHeaders / format.MaxBatchRecords
	body := (format.MaxBatchMeteredBytes - per*format.MaxBatchRecords) / format.MaxBatchRecords
	for i := range format.MaxBatchRecords {
		r := &strandv1.AppendRecord{Body: make([]byte, body)}
		n := per
		if i == 0 {
			n += format.MaxBatchHeaders - per*format.MaxBatchRecords
			r.Body = r.Body[:body-(n-per)]
		}
		for range n {
			r.Headers = append(r.Headers, &strandv1.Header{Name: []byte("h"), Value: []byte{}})
		}
		m.Records = append(m.Records, r)
	}
	return m
}

// TestAllocationBounds measures what one request and one connection make
// the process allocate, the figures of docs/reliability.md ("Security
// limits"): go test ./tests/hostile -run TestAllocationBounds -v. Each is
// held to its published bound.
func TestAllocationBounds(t *testing.T) {
	e := newEnv(t, nil)
	// Idle connections: the HTTP/2 preface only.
	const conns = 200
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var cs []net.Conn
	for range conns {
		c, err := net.Dial("tcp", e.ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
		_, _ = io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	}
	time.Sleep(500 * time.Millisecond)
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / conns
	t.Logf("an idle HTTP/2 connection: %d KiB of heap held (over %d)", per>>10, conns)
	if per > 64<<10 {
		t.Errorf("an idle connection holds %d KiB (bound 64 KiB)", per>>10)
	}
	for _, c := range cs {
		c.Close()
	}

	stream := e.w.Streams[0].Name
	big := largestHeaders(stream)
	pb, err := proto.Marshal(big)
	if err != nil {
		t.Fatal(err)
	}
	js, err := protojson.MarshalOptions{EmitDefaultValues: true}.Marshal(big)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, ctype string
		body        []byte
		want        string
		bound       uint64 // bytes allocated, the body's own copy included
	}{
		{"largest legal append, protobuf", "application/proto", pb, "", 48 << 20},
		{"largest legal append, JSON", "application/json", js, "", 64 << 20},
		{"refused append of 3.1 M empty records", "application/proto", emptyRecords(stream, 3_100_000), "invalid_argument", 24 << 20},
	} {
		var code string
		got := allocated(func() { code = e.postType(t, "/strand.v1.StrandService/Append", e.admin, tc.ctype, tc.body) })
		t.Logf("%s (%d bytes): %d MiB allocated (bound %d MiB)", tc.name, len(tc.body), got>>20, tc.bound>>20)
		if code != tc.want || got > tc.bound {
			t.Errorf("%s: code %q, %d MiB allocated (want %q within %d MiB)", tc.name, code, got>>20, tc.want, tc.bound>>20)
		}
	}

	// One AppendSession message of the largest legal batch.
	c := strandv1connect.NewStrandServiceClient(client.NewHTTPClient(), e.ts.URL, connect.WithGRPC())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := allocated(func() {
		s := c.AppendSession(ctx)
		s.RequestHeader().Set("Authorization", "Bearer "+e.admin)
		_ = s.Send(big)
		_ = s.CloseRequest()
		if _, err := s.Receive(); err != nil {
			t.Errorf("AppendSession of the largest batch: %v", err)
		}
		_ = s.CloseResponse()
	})
	t.Logf("an AppendSession message of the largest legal batch: %d MiB allocated, the client's own encoding included", got>>20)
}
