package hostile

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/api/strandv1/strandv1connect"
	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/rawjson"
	"github.com/strandlog/strand/shared/server"
	"github.com/strandlog/strand/tests/sim"
	"github.com/strandlog/strand/tests/testnode"
)

// env is a star on the simulated stores and its API over HTTP/1.1 and h2c,
// with authentication and one admin token.
type env struct {
	api   *testnode.API
	w     *sim.World
	ts    *httptest.Server
	admin string
}

func newEnv(t testing.TB, mod func(*server.Config)) *env { return newEnvHTTP(t, mod, nil) }

func newEnvHTTP(t testing.TB, mod func(*server.Config), httpMod func(*http.Server)) *env {
	a := testnode.Start(t, func(c *server.Config) {
		// The server as hostile tests always had it: no sim heartbeat,
		// randomness or window.
		c.Heartbeat, c.Rand, c.Window = 0, nil, nil
		if mod != nil {
			mod(c)
		}
	}, httpMod)
	return &env{api: a, w: a.W, ts: a.TS, admin: a.Issue(t, 1, "", auth.Admin)}
}

// gzipBomb is a gzip body that inflates to 1 GiB of zeros: one member of
// 16 MiB of zeros, repeated (gzip readers read concatenated members as
// one stream).
func gzipBomb(t testing.TB) []byte {
	var one bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&one, gzip.BestCompression)
	if _, err := zw.Write(make([]byte, 16<<20)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return bytes.Repeat(one.Bytes(), 64)
}

// zeros is an endless body that costs its sender nothing.
type zeros struct{ left int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.left <= 0 {
		return 0, io.EOF
	}
	n := min(int64(len(p)), z.left)
	clear(p[:n])
	z.left -= n
	return int(n), nil
}

// post sends body to procedure as a Connect unary JSON call and returns the
// Connect error code of the answer ("" for success).
func (e *env) post(t testing.TB, procedure, token string, body io.Reader, gzipped bool) string {
	return e.send(t, procedure, token, "application/json", body, gzipped)
}

// postType sends body to procedure as a Connect unary call of content type
// ctype and returns the Connect error code of the answer ("" for success).
func (e *env) postType(t testing.TB, procedure, token, ctype string, body []byte) string {
	return e.send(t, procedure, token, ctype, bytes.NewReader(body), false)
}

func (e *env) send(t testing.TB, procedure, token, ctype string, body io.Reader, gzipped bool) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.ts.URL+procedure, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ctype)
	if gzipped {
		req.Header.Set("Content-Encoding", "gzip")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// A raw HTTP/1.1 exchange that reads the answer while the body is
	// still being written: a server that refuses early answers and hangs
	// up, and net/http's client may then report its own write error
	// instead of the answer.
	conn, err := net.Dial("tcp", e.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	go func() { _ = req.Write(conn) }()
	res, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatalf("%s: %v", procedure, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if res.StatusCode == http.StatusOK {
		return ""
	}
	var ce struct{ Code string }
	if err := json.Unmarshal(data, &ce); err != nil {
		t.Fatalf("%s: status %d, body %q is not a Connect error", procedure, res.StatusCode, data)
	}
	return ce.Code
}

// answerCode sends req and returns the Connect error code of its answer
// ("" for success).
func answerCode(t testing.TB, req *http.Request) string {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var ce struct{ Code string }
	_ = json.NewDecoder(res.Body).Decode(&ce)
	return ce.Code
}

// allocated runs f and returns the bytes the process allocated meanwhile:
// an upper bound of how far the server's heap rose above its idle figure.
func allocated(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

const memBound = 100 << 20

// TestBombsAndOversizedBodies: a gzip bomb (4 MB inflating to 1 GiB) and a
// 256 MiB plain body are refused — Unauthenticated without a token (before
// the body is read), ResourceExhausted with one (an Append: InvalidArgument,
// its first 64 KiB, inflated, name no stream; ADR 0074) — and the server
// allocates less than 100 MB for each.
func TestBombsAndOversizedBodies(t *testing.T) {
	e := newEnv(t, nil)
	bomb := gzipBomb(t)
	for _, tc := range []struct {
		name    string
		token   string
		body    func() io.Reader
		gzipped bool
		want    string
	}{
		{"gzip bomb, no token", "", func() io.Reader { return bytes.NewReader(bomb) }, true, "unauthenticated"},
		{"gzip bomb, unknown token", "strand_" + string(bytes.Repeat([]byte("a"), 52)), func() io.Reader { return bytes.NewReader(bomb) }, true, "unauthenticated"},
		{"gzip bomb, admin token", e.admin, func() io.Reader { return bytes.NewReader(bomb) }, true, "resource_exhausted"},
		{"256 MiB body, no token", "", func() io.Reader { return &zeros{256 << 20} }, false, "unauthenticated"},
		{"256 MiB body, admin token", e.admin, func() io.Reader { return &zeros{256 << 20} }, false, "resource_exhausted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, proc := range []string{"/strand.v1.StrandService/ListStreams", "/strand.v1.StrandService/Append"} {
				var code string
				n := allocated(func() { code = e.post(t, proc, tc.token, tc.body(), tc.gzipped) })
				want := tc.want
				if want == "resource_exhausted" && proc == "/strand.v1.StrandService/Append" {
					want = "invalid_argument" // refused from its first 64 KiB (sniff.go)
				}
				if code != want {
					t.Errorf("%s: code %q, want %q", proc, code, want)
				}
				if n > memBound {
					t.Errorf("%s: the process allocated %d MB answering it (bound %d MB)", proc, n>>20, memBound>>20)
				}
			}
		})
	}
}

// TestLargestLegalRequestsPass: the limits sit above the largest legal
// append, in protobuf (gRPC, compressed or not) and in JSON with the
// costliest shape (many one-byte headers), so no honest request is
// refused by them.
func TestLargestLegalRequestsPass(t *testing.T) {
	e := newEnv(t, nil)
	stream := e.w.Streams[0].Name
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// One record: 1 MiB metered, all body.
	big := &strandv1.AppendRequest{Stream: stream, Records: []*strandv1.AppendRecord{{Body: make([]byte, format.MaxRecordBytes)}}}
	// 1000 records holding the batch's 65,535 one-byte headers (with empty
	// values: the most JSON per metered byte), the rest of the metered
	// bytes in bodies.
	headers := largestHeaders(stream)
	for _, req := range []*strandv1.AppendRequest{big, headers} {
		recs, err := server.ParseAppend(req)
		if err != nil {
			t.Fatal(err)
		}
		metered := 0
		for _, r := range recs.Records {
			metered += format.MeteredSize(r)
		}
		if _, err := format.ValidateBatch(recs.Records); err != nil || metered < format.MaxBatchMeteredBytes*99/100 {
			t.Fatalf("the test's request is not a largest legal one: %d bytes metered, %v", metered, err)
		}
		js, err := protojson.MarshalOptions{EmitDefaultValues: true}.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if code := e.post(t, "/strand.v1.StrandService/Append", e.admin, bytes.NewReader(js), false); code != "" {
			t.Errorf("JSON append of %d bytes: %s", len(js), code)
		}
		for _, opts := range [][]connect.ClientOption{{connect.WithGRPC()}, {connect.WithGRPC(), connect.WithSendGzip()}, {}} {
			c := strandv1connect.NewStrandServiceClient(client.NewHTTPClient(), e.ts.URL, opts...)
			r := connect.NewRequest(req)
			r.Header().Set("Authorization", "Bearer "+e.admin)
			if _, err := c.Append(ctx, r); err != nil {
				t.Errorf("protobuf append (%d options): %v", len(opts), err)
			}
		}
	}
	// The same headers as raw JSON (bodies of letters: raw JSON escapes a
	// zero byte in six): it decodes to about 84 MiB, more than a tenant's
	// half of the decoding budget, whose charge is capped at that half.
	for _, r := range headers.Records {
		r.Body = bytes.Repeat([]byte("x"), len(r.Body))
	}
	raw, err := rawjson.Marshal(headers)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.ts.URL+"/strand.v1.StrandService/Append", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(server.FormatHeader, "raw")
	req.Header.Set("Authorization", "Bearer "+e.admin)
	if code := answerCode(t, req); code != "" {
		t.Errorf("raw JSON append of %d bytes: %s", len(raw), code)
	}
}

// TestStreamMessageBounded: one AppendSession message over the limit ends
// the session with ResourceExhausted, compressed (a bomb) or not.
func TestStreamMessageBounded(t *testing.T) {
	e := newEnv(t, func(c *server.Config) { c.Limits.MaxMessageBytes = 2 << 20 })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, opts := range [][]connect.ClientOption{{connect.WithGRPC()}, {connect.WithGRPC(), connect.WithSendGzip()}, {connect.WithSendGzip()}} {
		c := strandv1connect.NewStrandServiceClient(client.NewHTTPClient(), e.ts.URL, opts...)
		var n uint64
		got := allocated(func() {
			s := c.AppendSession(ctx)
			s.RequestHeader().Set("Authorization", "Bearer "+e.admin)
			_ = s.Send(&strandv1.AppendRequest{Stream: e.w.Streams[0].Name, Records: []*strandv1.AppendRecord{{Body: make([]byte, 8<<20)}}})
			_ = s.CloseRequest()
			_, err := s.Receive()
			if connect.CodeOf(err) != connect.CodeResourceExhausted {
				t.Errorf("options %d: %v, want resource_exhausted", len(opts), err)
			}
			_ = s.CloseResponse()
		})
		n = got
		// The client's own 8 MiB message (and its compressed copy) are
		// allocated here too; the server adds at most its 2 MiB limit.
		if n > 8<<20*3+memBound {
			t.Errorf("options %d: %d MB allocated", len(opts), n>>20)
		}
	}
}

// TestGetBomb: a Connect GET (the read-only methods allow it) carrying a
// gzip bomb in its query is bounded like a body: the URL by the header
// limit, the inflated message by the message limit.
func TestGetBomb(t *testing.T) {
	e := newEnv(t, nil)
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	_, _ = zw.Write(make([]byte, 40<<20))
	_ = zw.Close()
	q := url.Values{"connect": {"v1"}, "encoding": {"proto"}, "compression": {"gzip"}, "base64": {"1"},
		"message": {base64.RawURLEncoding.EncodeToString(z.Bytes())}}
	for _, tc := range []struct{ token, want string }{{"", "unauthenticated"}, {e.admin, "resource_exhausted"}} {
		var code string
		n := allocated(func() {
			req, _ := http.NewRequest(http.MethodGet, e.ts.URL+"/strand.v1.StrandService/ListStreams?"+q.Encode(), nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			code = answerCode(t, req)
		})
		if code != tc.want {
			t.Errorf("token %t: code %q, want %q", tc.token != "", code, tc.want)
		}
		if n > memBound {
			t.Errorf("token %t: %d MB allocated", tc.token != "", n>>20)
		}
	}
}
