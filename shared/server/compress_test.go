package server_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/strandlog/strand/shared/client"
)

// encodings records, per request path, whether the response was
// compressed: a unary response's Content-Encoding; for a stream, the flags
// byte of its first envelope (0x01: compressed), since a stream's
// Connect-Content-Encoding header only names what messages may use.
type encodings struct {
	base http.RoundTripper
	mu   sync.Mutex
	seen map[string]string
}

func (e *encodings) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := e.base.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if resp.Header.Get("Connect-Content-Encoding") == "" {
		e.seen[r.URL.Path] = resp.Header.Get("Content-Encoding")
		return resp, nil
	}
	first := make([]byte, 1)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		return nil, err
	}
	e.seen[r.URL.Path] = map[bool]string{true: "gzip", false: ""}[first[0]&1 == 1]
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(first), resp.Body), resp.Body}
	return resp, nil
}

// Read and ReadSession responses go out uncompressed although the client
// accepts gzip (Connect clients do by default), and so do small responses
// of any call; a large response of another call still compresses (the
// control: the client did ask).
func TestReadResponsesUncompressed(t *testing.T) {
	ctx := context.Background()
	n := newNode(t, newMeta(t), "star-0", false, nil)
	hc := client.NewHTTPClient()
	enc := &encodings{base: hc.Transport, seen: map[string]string{}}
	hc.Transport = enc
	c, err := client.New(n.ts.URL, client.WithHTTPClient(hc))
	must(t, err)
	_, err = c.CreateStream(ctx, "logs/z", client.CreateOptions{Class: "express"})
	must(t, err)
	body := bytes.Repeat([]byte("compressible "), 4096)
	_, err = c.Append(ctx, "logs/z", []client.Record{{Body: body}, {Body: body}}, client.AppendOptions{})
	must(t, err)
	res, err := c.Read(ctx, "logs/z", client.FromSeq(0), client.Limits{})
	must(t, err)
	if len(res.Records) != 2 || !bytes.Equal(res.Records[1].Body, body) {
		t.Fatalf("read %d records", len(res.Records))
	}
	rs, err := c.OpenReadSession(ctx, "logs/z", client.FromSeq(0), client.SessionOptions{NoTail: true})
	must(t, err)
	got := 0
	for rs.Next() {
		got += len(rs.Batch().Records)
	}
	must(t, rs.Err())
	rs.Close()
	if got != 2 {
		t.Fatalf("session read %d records", got)
	}
	// A large listing compresses; a small response does not.
	for i := range 40 {
		_, err = c.CreateStream(ctx, fmt.Sprintf("logs/%s-%02d", strings.Repeat("long-name-", 10), i), client.CreateOptions{Class: "express"})
		must(t, err)
	}
	_, _, err = c.ListStreams(ctx, "logs/", "", 100)
	must(t, err)
	_, err = c.CheckTail(ctx, "logs/z")
	must(t, err)
	enc.mu.Lock()
	defer enc.mu.Unlock()
	for _, p := range []string{"/strand.v1.StrandService/Read", "/strand.v1.StrandService/ReadSession"} {
		if e, ok := enc.seen[p]; !ok || e != "" {
			t.Errorf("%s: response encoding %q (seen %v), want none", p, e, ok)
		}
	}
	if e := enc.seen["/strand.v1.StrandService/ListStreams"]; e != "gzip" {
		t.Errorf("ListStreams response encoding %q: want gzip (the client accepts it, the listing is large)", e)
	}
	if e := enc.seen["/strand.v1.StrandService/CheckTail"]; e != "" {
		t.Errorf("CheckTail response encoding %q: want none (under 1 KiB)", e)
	}
}
