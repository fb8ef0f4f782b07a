package hostile

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/api/strandv1/strandv1connect"
	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/server"
)

// emptyRecords is an AppendRequest for stream holding n empty records as
// protobuf: field 2, length 0 (0x12 0x00), n times.
func emptyRecords(stream string, n int) []byte {
	b := append([]byte{0x0a, byte(len(stream))}, stream...)
	return append(b, bytes.Repeat([]byte{0x12, 0x00}, n)...)
}

// emptyRecordsJSON is the same in JSON: "records":[{},{},...].
func emptyRecordsJSON(stream string, n int) []byte {
	return []byte(`{"stream":"` + stream + `","records":[{}` + strings.Repeat(`,{}`, n-1) + `]}`)
}

// decodeBound is what one refused append may make the process allocate
// (the 6 MiB body read once, and the answer); before issue 31 a 6 MiB body
// of 3.1 M empty records allocated 603 MiB.
const decodeBound = 24 << 20

// TestManyEmptyRecordsBounded (issue 31 finding 1): an Append of 3 M empty
// records (6 MiB of protobuf, or 6 MiB of JSON "[{},{},...]") costs the
// server about its size, not a slot per claimed record: from a read-only
// token of another prefix it is permission_denied before the body is read;
// from a token that may append it is invalid_argument, counted while
// decoding. AppendSession messages are bounded the same way.
func TestManyEmptyRecordsBounded(t *testing.T) {
	e := newEnv(t, nil)
	stream := e.w.Streams[0].Name
	ro := e.api.Issue(t, 7, "elsewhere/", auth.Read)
	const n = 3_100_000
	pb := emptyRecords(stream, n)
	js := emptyRecordsJSON(stream, 2_000_000)
	for _, tc := range []struct {
		name, token, ctype string
		body               []byte
		want               string
	}{
		{"proto, read-only token of another prefix", ro, "application/proto", pb, "permission_denied"},
		{"proto, admin token", e.admin, "application/proto", pb, "invalid_argument"},
		{"json, read-only token of another prefix", ro, "application/json", js, "permission_denied"},
		{"json, admin token", e.admin, "application/json", js, "invalid_argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var code string
			got := allocated(func() { code = e.postType(t, "/strand.v1.StrandService/Append", tc.token, tc.ctype, tc.body) })
			if code != tc.want {
				t.Errorf("code %q, want %q", code, tc.want)
			}
			if got > decodeBound {
				t.Errorf("a %d-byte append allocated %d MiB (bound %d MiB)", len(tc.body), got>>20, decodeBound>>20)
			}
		})
	}
	// One AppendSession message of the same records, as gRPC over h2c.
	frame := make([]byte, 5, 5+len(pb))
	binary.BigEndian.PutUint32(frame[1:], uint32(len(pb)))
	frame = append(frame, pb...)
	var status string
	got := allocated(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.ts.URL+strandv1connect.StrandServiceAppendSessionProcedure, bytes.NewReader(frame))
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("Te", "trailers")
		req.Header.Set("Authorization", "Bearer "+e.admin)
		res, err := client.NewHTTPClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		_, _ = io.Copy(io.Discard, res.Body)
		status = res.Trailer.Get("Grpc-Status") + res.Header.Get("Grpc-Status")
	})
	if status != "3" { // invalid_argument
		t.Errorf("AppendSession of %d empty records: grpc-status %q, want 3 (invalid_argument)", n, status)
	}
	if got > decodeBound {
		t.Errorf("AppendSession: %d MiB allocated (bound %d MiB)", got>>20, decodeBound>>20)
	}
}

// TestSmallProceduresBounded: a procedure whose largest legal message is a
// few KiB reads at most server.DefaultMaxSmallMessageBytes; a 1 MiB
// CreateStream body is resource_exhausted before it is read, and a
// declared body past the server's decoding budget is refused as busy.
func TestSmallProceduresBounded(t *testing.T) {
	e := newEnv(t, func(c *server.Config) { c.Limits.MaxDecodingBytes = 1 << 20 })
	big := []byte(`{"name":"x","pad":"` + strings.Repeat("a", 1<<20) + `"}`)
	if code := e.postType(t, "/strand.v1.StrandService/CreateStream", e.admin, "application/json", big); code != "resource_exhausted" {
		t.Errorf("a 1 MiB CreateStream: %q, want resource_exhausted", code)
	}
	// An append of 2 MiB is legal in size but past a 1 MiB budget.
	app := emptyRecordsJSON(e.w.Streams[0].Name, 700_000)
	if code := e.postType(t, "/strand.v1.StrandService/Append", e.admin, "application/json", app); code != "resource_exhausted" {
		t.Errorf("an append past the decoding budget: %q, want resource_exhausted", code)
	}
	small := []byte(`{"name":"` + e.w.Streams[0].Name + `"}`)
	if code := e.postType(t, "/strand.v1.StrandService/GetStream", e.admin, "application/json", small); code != "" {
		t.Errorf("a small GetStream: %q", code)
	}
}

// TestAppendSessionMessagesBudgeted (issue 31): AppendSession messages
// being read count against the server's decoding budget like unary bodies:
// with a 4 MiB budget, two sessions each part-way through a 2 MiB message
// hold it all, and a third session's message is refused resource_exhausted
// rather than read.
func TestAppendSessionMessagesBudgeted(t *testing.T) {
	e := newEnv(t, func(c *server.Config) {
		c.Limits.MaxDecodingBytes, c.Limits.MaxMessageBytes, c.Limits.DecodeWait = 4<<20, 2<<20, 300*time.Millisecond
	})
	other := e.api.Issue(t, 11, "", auth.Admin) // another tenant: its own share
	e.stalledSession(t, e.admin, 2<<20-100)
	e.stalledSession(t, other, 2<<20-100)
	time.Sleep(200 * time.Millisecond)
	wantStatus(t, "the third session's message past the budget", e.stalledSession(t, e.admin, 2<<20-100), "8")
}

// stalledSession opens an AppendSession with token (gRPC over h2c) and
// sends the prefix of a message of size bytes and its first byte, then
// stalls; the answer arrives on the channel (closed if the request fails).
func (e *env) stalledSession(t *testing.T, token string, size uint32) chan *http.Response {
	t.Helper()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.ts.URL+strandv1connect.StrandServiceAppendSessionProcedure, pr)
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	req.Header.Set("Authorization", "Bearer "+token)
	got := make(chan *http.Response, 1)
	go func() {
		res, err := client.NewHTTPClient().Do(req)
		if err != nil {
			close(got)
			return
		}
		got <- res
	}()
	prefix := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(prefix[1:], size)
	if _, err := pw.Write(append(prefix, 0x0a)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pw.Close() })
	return got
}

// wantStatus waits up to 15 s for the answer on ch and checks its gRPC
// status.
func wantStatus(t *testing.T, what string, ch chan *http.Response, want string) {
	t.Helper()
	select {
	case res, ok := <-ch:
		if !ok {
			t.Fatalf("%s: the request failed", what)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if status := res.Header.Get("Grpc-Status") + res.Trailer.Get("Grpc-Status"); status != want {
			t.Errorf("%s: grpc-status %q, want %s", what, status, want)
		}
	case <-time.After(15 * time.Second):
		t.Errorf("%s: no answer in 15 s", what)
	}
}

// TestDecodingBudgetSharedPerTenant (issue 31): one tenant may hold at
// most half the decoding budget, so its stalled messages never refuse
// another tenant's append: with an 8 MiB budget, a tenant's four 2 MiB
// messages take 4 MiB (its last two are refused) and another tenant's
// append is acknowledged.
func TestDecodingBudgetSharedPerTenant(t *testing.T) {
	e := newEnv(t, func(c *server.Config) {
		c.Limits.MaxDecodingBytes, c.Limits.MaxMessageBytes, c.Limits.DecodeWait = 8<<20, 2<<20, 300*time.Millisecond
	})
	flood := e.api.Issue(t, 12, "", auth.Admin)
	var refused []chan *http.Response
	for i := range 4 {
		ch := e.stalledSession(t, flood, 2<<20)
		if i >= 2 {
			refused = append(refused, ch)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := e.client(t, e.admin)
	as, err := c.OpenAppendSession(ctx, e.w.Streams[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	defer as.Close()
	if err := as.Submit([]client.Record{{Body: []byte("mine")}}, client.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if a := <-as.Acks(); a.Err != nil {
		t.Errorf("another tenant's append while one tenant floods the budget: %v", a.Err)
	}
	for _, ch := range refused {
		wantStatus(t, "a flooding tenant's message past its half of the budget", ch, "8")
	}
}

// TestManyJSONMembersBounded (issue 31): raw JSON (Strand-Format: raw) is
// decoded into maps first, a map entry per object member: an append of
// 6 MiB of distinct unknown members is refused before it is decoded, at
// about its size.
func TestManyJSONMembersBounded(t *testing.T) {
	e := newEnv(t, nil)
	var b strings.Builder
	b.WriteString(`{"stream":"` + e.w.Streams[0].Name + `","records":[{"body":"x"`)
	for i := 0; b.Len() < 6<<20-64; i++ {
		fmt.Fprintf(&b, `,"k%d":0`, i)
	}
	b.WriteString(`}]}`)
	var code string
	got := allocated(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.ts.URL+"/strand.v1.StrandService/Append", strings.NewReader(b.String()))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(server.FormatHeader, "raw")
		req.Header.Set("Authorization", "Bearer "+e.admin)
		code = answerCode(t, req)
	})
	t.Logf("a raw JSON append of %d bytes of unknown members: %s, %d MiB allocated", b.Len(), code, got>>20)
	if code != "invalid_argument" || got > decodeBound+(12<<20) {
		t.Errorf("a raw JSON append of %d bytes of unknown members: %q, %d MiB allocated (want invalid_argument within %d MiB)", b.Len(), code, got>>20, (decodeBound+(12<<20))>>20)
	}
}
