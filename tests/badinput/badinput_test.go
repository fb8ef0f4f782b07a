// Package badinput sends bad input and bad credentials through the API
// (JSON over plain HTTP, protobuf, and the Go client) to a star on the
// simulated stores, and checks that each is refused with its specific
// code and reason and changes nothing: no stream, no record, no object.
// It also fuzzes every API request through the server's handler, checks
// that tokens are required on every call and never logged, that the API
// serves TLS, and that stored objects with bad versions or length fields
// are never served.
package badinput

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/tests/sim"
	"github.com/strandlog/strand/tests/testnode"
)

type env struct {
	w   *sim.World
	n   *sim.Node
	ts  *httptest.Server
	tok map[string]string
}

// newEnv starts a star and its API with authentication, four streams
// s0..s3 holding a few records each, and tokens: admin (every stream),
// read and append scoped to "s0", and an issued-then-unknown one.
func newEnv(t testing.TB) *env {
	a := testnode.Start(t, nil, nil)
	e := &env{w: a.W, n: a.N, ts: a.TS, tok: map[string]string{
		"admin":     a.Issue(t, 1, "", auth.Admin),
		"read-s0":   a.Issue(t, 2, "s0", auth.Read),
		"append-s0": a.Issue(t, 3, "s0", auth.Append),
		"unknown":   testnode.Token(t, 9),
	}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := e.client(t, "admin")
	for _, st := range e.w.Streams {
		if _, err := c.Append(ctx, st.Name, []client.Record{{Body: []byte("r0")}, {Body: []byte("r1")}}, client.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func (e *env) client(t testing.TB, tok string) *client.Client {
	c, err := client.New(e.ts.URL, client.WithToken(e.tok[tok]))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// snapshot is everything a bad request must not change: the stream list,
// every tail, and every object in every bucket.
type snapshot struct {
	streams []string
	tails   []uint64
	objects []string
}

func (e *env) snap(t testing.TB) snapshot {
	e.settled(t)
	var s snapshot
	ss, _, err := e.w.Meta.ListStreams(context.Background(), "", "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range ss {
		s.streams = append(s.streams, st.Name+"/"+st.ID+fmt.Sprint(st.State))
	}
	for _, id := range e.w.IDs {
		tail, _, err := e.n.Star.Tail(id)
		if err != nil {
			tail = ^uint64(0) // forgotten (deleted by an accepted request)
		}
		s.tails = append(s.tails, tail)
	}
	for _, m := range append(e.w.Mems, e.w.SettledMem) {
		for _, k := range m.Keys() {
			if !strings.HasPrefix(k, "probes/") {
				s.objects = append(s.objects, m.Name()+"/"+k)
			}
		}
	}
	return s
}

// settled waits until what accepted requests set going in the background
// is done: every flight slot has landed in every zone (the star acks at W
// copies; the last copy lands after the ack) and the absorb has taken
// every slot the star released (each chain's checkpoint at its released
// head; with the pass index, its pass index object is in the settled
// bucket). So none of it is mistaken for a change a refused request made.
func (e *env) settled(t testing.TB) {
	deadline := time.Now().Add(30 * time.Second)
	wait := func(what string, done func() (bool, string)) {
		for {
			ok, state := done()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s after 30 s", what, state)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	wait("flight copies", func() (bool, string) {
		var first []string
		for i, m := range e.w.Mems {
			var keys []string
			for _, k := range m.Keys() {
				if strings.HasPrefix(k, "chains/") {
					keys = append(keys, k)
				}
			}
			slices.Sort(keys)
			if i == 0 {
				first = keys
			} else if !slices.Equal(keys, first) {
				return false, fmt.Sprintf("zone %d holds %d flight objects, zone 0 %d", i, len(keys), len(first))
			}
		}
		return true, ""
	})
	for _, c := range e.n.Star.Chains() {
		wait("absorb of "+c.String(), func() (bool, string) {
			h, err := e.w.Meta.GetHead(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			rel := e.n.Star.Released(c)
			return !h.Checkpoint.Less(rel), fmt.Sprintf("checkpoint %s, released %s", h.Checkpoint, rel)
		})
	}
}

// diff names what differs between s and o (the first few objects).
func (s snapshot) diff(o snapshot) string {
	var out []string
	if !slices.Equal(s.streams, o.streams) {
		out = append(out, fmt.Sprintf("streams %v, then %v", s.streams, o.streams))
	}
	if !slices.Equal(s.tails, o.tails) {
		out = append(out, fmt.Sprintf("tails %v, then %v", s.tails, o.tails))
	}
	in := func(x string, l []string) bool { return slices.Contains(l, x) }
	for _, k := range o.objects {
		if !in(k, s.objects) && len(out) < 8 {
			out = append(out, "new object "+k)
		}
	}
	for _, k := range s.objects {
		if !in(k, o.objects) && len(out) < 8 {
			out = append(out, "gone object "+k)
		}
	}
	return strings.Join(out, "; ")
}

func (s snapshot) equal(o snapshot) bool {
	return slices.Equal(s.streams, o.streams) && slices.Equal(s.tails, o.tails) && slices.Equal(s.objects, o.objects)
}

// post sends one unary call as Connect JSON (or protobuf) over HTTP/1.1
// and returns the HTTP status, the Connect error code and its message.
func (e *env) post(t testing.TB, method, contentType string, body []byte, token string) (int, string, string) {
	req, err := http.NewRequest("POST", e.ts.URL+"/strand.v1.StrandService/"+method, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %q: %v", method, body, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == 200 {
		return 200, "", string(raw)
	}
	var ce struct{ Code, Message string }
	_ = json.Unmarshal(raw, &ce)
	return resp.StatusCode, ce.Code, ce.Message
}

func b64(n int) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{'x'}, n)) }

func records(n int) string {
	rs := make([]string, n)
	for i := range rs {
		rs[i] = `{"body":"eA=="}`
	}
	return "[" + strings.Join(rs, ",") + "]"
}

// TestBadInputJSON: each bad request over JSON is refused with its code
// and a reason that says what is wrong, and changes nothing.
func TestBadInputJSON(t *testing.T) {
	e := newEnv(t)
	admin := e.tok["admin"]
	long := strings.Repeat("n", 513)
	const js = "application/json"
	cases := []struct {
		name, method, ctype, body string
		code, reason              string
	}{
		{"empty batch", "Append", js, `{"stream":"s0","records":[]}`, "invalid_argument", "empty batch"},
		{"more than 1000 records", "Append", js, `{"stream":"s0","records":` + records(1001) + `}`, "invalid_argument", "1001 records (at most 1000)"},
		{"oversized batch", "Append", js, `{"stream":"s0","records":[{"body":"` + b64(600<<10) + `"},{"body":"` + b64(600<<10) + `"}]}`, "invalid_argument", "batch too large"},
		{"oversized record", "Append", js, `{"stream":"s0","records":[{"body":"` + b64(1<<20+1) + `"}]}`, "invalid_argument", "at most 1048576"},
		{"empty header name", "Append", js, `{"stream":"s0","records":[{"headers":[{"name":"","value":"dg=="}]}]}`, "invalid_argument", "invalid record"},
		{"negative timestamp", "Append", js, `{"stream":"s0","records":[{"timestampMs":"-5","body":"eA=="}]}`, "invalid_argument", "timestamp_ms -5 is negative"},
		{"empty stream name", "Append", js, `{"stream":"","records":[{"body":"eA=="}]}`, "invalid_argument", "empty stream name"},
		{"stream name too long", "CreateStream", js, `{"name":"` + long + `"}`, "invalid_argument", "longer than 512 bytes"},
		{"control character in name", "CreateStream", js, `{"name":"a\u0001b"}`, "invalid_argument", "control character"},
		{"name not UTF-8", "GetStream", "application/proto", "\x0a\x03a\xffb", "invalid_argument", ""},
		{"unknown storage class", "CreateStream", js, `{"name":"new","storageClass":7}`, "invalid_argument", "unknown storage_class 7"},
		{"class the star has no bucket set for", "CreateStream", js, `{"name":"std","storageClass":"STORAGE_CLASS_STANDARD"}`, "failed_precondition", "no standard bucket set"},
		{"negative retention", "CreateStream", js, `{"name":"new","retentionMs":"-1"}`, "invalid_argument", "retention_ms -1 is negative"},
		{"append to unknown stream", "Append", js, `{"stream":"nope","records":[{"body":"eA=="}]}`, "not_found", `stream "nope" does not exist`},
		{"read count above 1000", "Read", js, `{"stream":"s0","seqNum":"0","count":5000}`, "invalid_argument", "count 5000 is above 1000"},
		{"read bytes above 1 MiB", "Read", js, `{"stream":"s0","seqNum":"0","bytes":"2000000"}`, "invalid_argument", "bytes 2000000 is above 1048576"},
		{"negative read timestamp", "Read", js, `{"stream":"s0","timestampMs":"-1"}`, "invalid_argument", "timestamp_ms -1 is negative"},
		{"list limit out of range", "ListStreams", js, `{"limit":5000}`, "invalid_argument", "limit 5000 out of range"},
		{"match_seq_num miss", "Append", js, `{"stream":"s0","records":[{"body":"eA=="}],"matchSeqNum":"99"}`, "failed_precondition", "match_seq_num 99 does not match the tail 2"},
		{"malformed JSON", "Append", js, `{"stream":"s0","records":[`, "invalid_argument", "malformed append: JSON: a member's value is cut short"},
		{"JSON of the wrong shape", "Append", js, `{"stream":["s0"]}`, "invalid_argument", "malformed append: JSON: the stream is not a string"},
		{"malformed protobuf", "Append", "application/proto", "\x0a\xff\xff\xff\xff\x0f", "invalid_argument", "malformed append: protobuf stream field"},
		{"protobuf field of the wrong wire type", "Append", "application/proto", "\x0d\x01\x02\x03\x04", "invalid_argument", ""},
		{"base64 body not base64", "Append", js, `{"stream":"s0","records":[{"body":"@@@"}]}`, "invalid_argument", "unmarshal"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := e.snap(t)
			status, code, msg := e.post(t, tc.method, tc.ctype, []byte(tc.body), admin)
			if status == 200 || code != tc.code || !strings.Contains(msg, tc.reason) {
				t.Fatalf("HTTP %d code %q message %q; want code %q with %q", status, code, msg, tc.code, tc.reason)
			}
			if after := e.snap(t); !after.equal(before) {
				t.Fatalf("a refused request changed the state:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}
}

func mustProto(m proto.Message) string {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestReadPastTheTail: a read from past the tail is not an error: no
// records, and the tail, so a reader knows where to wait.
func TestReadPastTheTail(t *testing.T) {
	e := newEnv(t)
	c := e.client(t, "admin")
	res, err := c.Read(context.Background(), "s0", client.FromSeq(1_000_000), client.Limits{})
	if err != nil || len(res.Records) != 0 || res.NextSeq != 2 {
		t.Fatalf("read past the tail: %+v %v", res, err)
	}
	res, err = c.Read(context.Background(), "s0", client.FromTail(1_000_000), client.Limits{})
	if err != nil || len(res.Records) != 2 || res.Records[0].Seq != 0 {
		t.Fatalf("tail offset past the head: %+v %v", res, err)
	}
}

// TestBadInputGoClient: the same refusals through the Go client.
func TestBadInputGoClient(t *testing.T) {
	e := newEnv(t)
	c := e.client(t, "admin")
	ctx := context.Background()
	many := make([]client.Record, 1001)
	big := []client.Record{{Body: bytes.Repeat([]byte{1}, 1<<20+1)}}
	for _, tc := range []struct {
		name   string
		call   func() error
		code   connect.Code
		reason string
	}{
		{"empty batch", func() error { _, err := c.Append(ctx, "s0", nil, client.AppendOptions{}); return err }, connect.CodeInvalidArgument, "empty batch"},
		{"1001 records", func() error { _, err := c.Append(ctx, "s0", many, client.AppendOptions{}); return err }, connect.CodeInvalidArgument, "1001 records"},
		{"oversized record", func() error { _, err := c.Append(ctx, "s0", big, client.AppendOptions{}); return err }, connect.CodeInvalidArgument, "at most 1048576"},
		{"invalid name", func() error { _, err := c.CreateStream(ctx, "bad\nname", client.CreateOptions{}); return err }, connect.CodeInvalidArgument, "control character"},
		// The client refuses an unknown class itself, before any request.
		{"unknown class", func() error { _, err := c.CreateStream(ctx, "x", client.CreateOptions{Class: "glacier"}); return err }, connect.CodeUnknown, "glacier"},
		{"read limit", func() error { _, err := c.Read(ctx, "s0", client.FromSeq(0), client.Limits{Count: 1001}); return err }, connect.CodeInvalidArgument, "count 1001"},
		{"session on unknown stream", func() error {
			s, err := c.OpenAppendSession(ctx, "nope")
			if err == nil {
				s.Close()
			}
			return err
		}, connect.CodeNotFound, "does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.snap(t)
			err := tc.call()
			if connect.CodeOf(err) != tc.code || err == nil || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("error %v (code %v), want %v with %q", err, connect.CodeOf(err), tc.code, tc.reason)
			}
			if after := e.snap(t); !after.equal(before) {
				t.Fatalf("a refused call changed the state")
			}
		})
	}
}

// calls is one well-formed request per unary method, on stream s0.
var calls = []struct{ method, body string }{
	{"CreateStream", `{"name":"s0new"}`},
	{"DeleteStream", `{"name":"s0"}`},
	{"ListStreams", `{}`},
	{"GetStream", `{"name":"s0"}`},
	{"CheckTail", `{"stream":"s0"}`},
	{"Append", `{"stream":"s0","records":[{"body":"eA=="}]}`},
	{"Read", `{"stream":"s0","seqNum":"0"}`},
}

// TestTokensRequiredOnEveryCall: no token, a malformed one, an unknown one,
// and a scheme other than Bearer are Unauthenticated on every method, the
// sessions included; a token outside its prefix or operation is
// PermissionDenied; nothing changes; no secret is ever logged.
func TestTokensRequiredOnEveryCall(t *testing.T) {
	e := newEnv(t)
	const js = "application/json"
	for _, c := range calls {
		for _, tok := range []string{"", "strand_short", "not-a-token", e.tok["unknown"]} {
			before := e.snap(t)
			status, code, msg := e.post(t, c.method, js, []byte(c.body), tok)
			if status == 200 || code != "unauthenticated" || !strings.Contains(msg, "bearer token") {
				t.Fatalf("%s with token %q: HTTP %d %q %q, want unauthenticated", c.method, tok, status, code, msg)
			}
			if !e.snap(t).equal(before) {
				t.Fatalf("%s with a bad token changed the state", c.method)
			}
		}
		// Basic auth with a valid secret is not a bearer token.
		req, _ := http.NewRequest("POST", e.ts.URL+"/strand.v1.StrandService/"+c.method, strings.NewReader(c.body))
		req.Header.Set("Content-Type", js)
		req.SetBasicAuth("x", e.tok["admin"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s with basic auth: HTTP %d", c.method, resp.StatusCode)
		}
	}
	// Scope: the read token of "s0" may read s0, not s1, and may not append.
	scoped := []struct {
		tok, method, body, code string
	}{
		{"read-s0", "Read", `{"stream":"s1","seqNum":"0"}`, "permission_denied"},
		{"read-s0", "Append", `{"stream":"s0","records":[{"body":"eA=="}]}`, "permission_denied"},
		{"read-s0", "CreateStream", `{"name":"s0x"}`, "permission_denied"},
		{"read-s0", "DeleteStream", `{"name":"s0"}`, "permission_denied"},
		{"append-s0", "Append", `{"stream":"s1","records":[{"body":"eA=="}]}`, "permission_denied"},
		{"append-s0", "Read", `{"stream":"s0","seqNum":"0"}`, "permission_denied"},
		{"append-s0", "ListStreams", `{}`, "permission_denied"},
		{"append-s0", "DeleteStream", `{"name":"s0"}`, "permission_denied"},
	}
	for _, sc := range scoped {
		before := e.snap(t)
		status, code, msg := e.post(t, sc.method, js, []byte(sc.body), e.tok[sc.tok])
		if status == 200 || code != sc.code {
			t.Fatalf("%s %s: HTTP %d %q %q, want %s", sc.tok, sc.method, status, code, msg, sc.code)
		}
		if !e.snap(t).equal(before) {
			t.Fatalf("%s %s changed the state", sc.tok, sc.method)
		}
	}
	// In scope: allowed.
	if status, _, msg := e.post(t, "Read", js, []byte(`{"stream":"s0","seqNum":"0"}`), e.tok["read-s0"]); status != 200 {
		t.Fatalf("read-s0 reading s0: %d %s", status, msg)
	}
	if status, _, msg := e.post(t, "CheckTail", js, []byte(`{"stream":"s0"}`), e.tok["append-s0"]); status != 200 {
		t.Fatalf("append-s0 checking s0's tail: %d %s", status, msg)
	}
	// ListStreams with a scoped token lists only its prefix.
	status, _, body := e.post(t, "ListStreams", js, []byte(`{}`), e.tok["read-s0"])
	if status != 200 || strings.Contains(body, `"s1"`) || !strings.Contains(body, `"s0"`) {
		t.Fatalf("scoped listing: %d %s", status, body)
	}
	// Sessions need tokens too.
	ctx := context.Background()
	for _, tok := range []string{"", "unknown"} {
		c := e.client(t, tok)
		if _, err := c.OpenAppendSession(ctx, "s0"); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("append session with token %q: %v", tok, err)
		}
		if _, err := c.OpenReadSession(ctx, "s0", client.FromSeq(0), client.SessionOptions{}); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("read session with token %q: %v", tok, err)
		}
	}
	// A read token may open the session (CheckTail finds the leader), but
	// its first batch is refused and nothing is appended.
	before := e.snap(t)
	sess, err := e.client(t, "read-s0").OpenAppendSession(ctx, "s0")
	if err == nil {
		_ = sess.Submit([]client.Record{{Body: []byte("no")}}, client.AppendOptions{})
		a := <-sess.Acks()
		err = a.Err
		sess.Close()
	}
	if connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("append session with a read token: %v", err)
	}
	if !e.snap(t).equal(before) {
		t.Fatal("a refused append session changed the state")
	}
	for _, line := range e.w.Logs.Lines() {
		for name, tok := range e.tok {
			if strings.Contains(line, tok) || strings.Contains(line, strings.TrimPrefix(tok, auth.TokenPrefix)) {
				t.Fatalf("the %s token's secret was logged: %q", name, line)
			}
		}
	}
}

// fuzzCalls are the methods FuzzAPIRequest drives, with seeds that keep
// the streams in place (no valid delete).
var fuzzCalls = []string{"CreateStream", "DeleteStream", "ListStreams", "GetStream", "CheckTail", "Append", "Read"}

// FuzzAPIRequest sends arbitrary bodies, as JSON and as protobuf, to every
// unary method through the server's handler (decoding, parsing and
// validation, the way a client's request meets them). A request is either
// served or refused with a client-error code; a refusal changes nothing;
// nothing is ever an internal error.
func FuzzAPIRequest(f *testing.F) {
	e := newEnv(f)
	for i, m := range fuzzCalls {
		for _, c := range calls {
			if c.method == m && m != "DeleteStream" {
				f.Add(uint8(i), false, []byte(c.body))
			}
		}
	}
	f.Add(uint8(1), false, []byte(`{"name":"zz"}`))
	f.Add(uint8(5), false, []byte(`{"stream":"s0","records":[{"body":"eA==","headers":[{"name":"aA==","value":""}]}],"matchSeqNum":"2"}`))
	f.Add(uint8(6), false, []byte(`{"stream":"s0","tailOffset":"18446744073709551615","count":0}`))
	f.Add(uint8(6), false, []byte(`{"stream":"s1","timestampMs":"9223372036854775807"}`))
	f.Add(uint8(0), false, []byte(`{"name":"fz","storageClass":"STORAGE_CLASS_EXPRESS","retentionMs":"1"}`))
	f.Add(uint8(2), false, []byte(`{"prefix":"s","startAfter":"s0","limit":1}`))
	f.Add(uint8(5), true, []byte(mustProto(&strandv1.AppendRequest{Stream: "s1", Records: []*strandv1.AppendRecord{{Body: []byte("b"), TimestampMs: 5}}})))
	f.Add(uint8(6), true, []byte(mustProto(&strandv1.ReadRequest{Stream: "s1", Start: &strandv1.ReadRequest_SeqNum{SeqNum: 1}, Count: 3})))
	f.Add(uint8(0), true, []byte(mustProto(&strandv1.CreateStreamRequest{Name: "pz", StorageClass: strandv1.StorageClass_STORAGE_CLASS_STANDARD})))
	f.Add(uint8(3), true, []byte("\x0a\x03a\xffb"))
	f.Add(uint8(5), true, []byte("\x0a\xff\xff\xff\xff\x0f"))
	admin := e.tok["admin"]
	f.Fuzz(func(t *testing.T, m uint8, asProto bool, body []byte) {
		method := fuzzCalls[int(m)%len(fuzzCalls)]
		ctype := "application/json"
		if asProto {
			ctype = "application/proto"
		}
		before := e.snap(t)
		status, code, msg := e.post(t, method, ctype, body, admin)
		if status == 200 {
			return
		}
		switch code {
		case "invalid_argument", "not_found", "already_exists", "failed_precondition", "out_of_range":
		default:
			t.Fatalf("%s %q: HTTP %d code %q (%s): want a client error", method, body, status, code, msg)
		}
		if after := e.snap(t); !after.equal(before) {
			t.Fatalf("%s %q was refused (%s: %s) but changed the state: %s", method, body, code, msg, before.diff(after))
		}
	})
}
