package server_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/server"
)

// appendRaw posts body to Append with content type ctype (gzipped when
// gz) and returns the answer's Connect code ("" for success).
func appendRaw(t *testing.T, n *node, token, ctype string, body []byte, gz bool) (string, string) {
	t.Helper()
	if gz {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, err := zw.Write(body)
		must(t, err)
		must(t, zw.Close())
		body = buf.Bytes()
	}
	req, err := http.NewRequest("POST", n.ts.URL+"/strand.v1.StrandService/Append", bytes.NewReader(body))
	must(t, err)
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("Authorization", "Bearer "+token)
	if gz {
		req.Header.Set("Content-Encoding", "gzip")
	}
	res, err := http.DefaultClient.Do(req)
	must(t, err)
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode == http.StatusOK {
		return "", ""
	}
	var ce struct{ Code, Message string }
	if err := json.Unmarshal(raw, &ce); err != nil {
		t.Fatalf("status %d, body %q", res.StatusCode, raw)
	}
	return ce.Code, ce.Message
}

// bigJSON is a JSON append of 100 records of 1 KiB to stream, its members
// in the order given ("stream" first or last), with extra members after.
func bigJSON(stream string, streamFirst bool, extra string) []byte {
	var recs []string
	for range 100 {
		recs = append(recs, fmt.Sprintf(`{"body":%q}`, base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("r"), 1<<10))))
	}
	r := `"records":[` + strings.Join(recs, ",") + `]`
	s := fmt.Sprintf(`"stream":%q`, stream)
	if streamFirst {
		return []byte("{" + s + "," + r + extra + "}")
	}
	return []byte("{" + r + "," + s + extra + "}")
}

// TestAppendStreamFirst (ADR 0074): an Append over 64 KiB is authorized
// on the stream its message names first, read before the rest of its
// body. Such appends that name their stream first land, as JSON, gzipped
// JSON and protobuf (the client's); one that names it after its records,
// or names another stream later, is invalid_argument, nothing written.
func TestAppendStreamFirst(t *testing.T) {
	ctx := context.Background()
	n := newNode(t, newMeta(t), "star-0", true, nil)
	c := newClient(t, n, adminTok)
	_, err := c.CreateStream(ctx, "logs/f", client.CreateOptions{})
	must(t, err)
	for _, tc := range []struct {
		name, ctype string
		body        []byte
		gz          bool
		want        string
	}{
		{"JSON, stream first", "application/json", bigJSON("logs/f", true, ""), false, ""},
		{"gzipped JSON, stream first", "application/json", bigJSON("logs/f", true, ""), true, ""},
		{"JSON, stream after the records", "application/json", bigJSON("logs/f", false, ""), false, "invalid_argument"},
		{"gzipped JSON, stream after the records", "application/json", bigJSON("logs/f", false, ""), true, "invalid_argument"},
		{"raw JSON, another stream later", "application/rawjson", bigJSON("logs/f", true, `,"stream":"logs/g"`), false, "invalid_argument"},
	} {
		code, msg := appendRaw(t, n, appendTok, tc.ctype, tc.body, tc.gz)
		if code != tc.want {
			t.Errorf("%s: %q %s, want %q", tc.name, code, msg, tc.want)
		}
	}
	// Protobuf: the stream field twice, the second naming another stream.
	m := &strandv1.AppendRequest{Stream: "logs/f"}
	for range 100 {
		m.Records = append(m.Records, &strandv1.AppendRecord{Body: bytes.Repeat([]byte("p"), 1<<10)})
	}
	pb, err := proto.Marshal(m)
	must(t, err)
	twice, err := proto.Marshal(&strandv1.AppendRequest{Stream: "logs/g"})
	must(t, err)
	if code, msg := appendRaw(t, n, appendTok, "application/proto", append(pb, twice...), false); code != "invalid_argument" {
		t.Errorf("protobuf naming another stream later: %q %s, want invalid_argument", code, msg)
	}
	// The client's protobuf of 100 KiB lands.
	rs := make([]client.Record, 100)
	for i := range rs {
		rs[i] = client.Record{Body: bytes.Repeat([]byte("c"), 1<<10)}
	}
	_, err = newClient(t, n, appendTok).Append(ctx, "logs/f", rs, client.AppendOptions{})
	must(t, err)
	res, err := c.Read(ctx, "logs/f", client.FromSeq(0), client.Limits{Count: 1000})
	must(t, err)
	if len(res.Records) != 300 {
		t.Fatalf("logs/f holds %d records, want 300 (three appends of 100 landed, the refused ones none)", len(res.Records))
	}
}

// FuzzSniffEncoders: the protobuf and JSON encoders name an append's
// stream first, so the stream read from the first 64 KiB of any append
// they encode is its stream (the rule sniff.go relies on).
func FuzzSniffEncoders(f *testing.F) {
	f.Add("logs/a", 3, 70000, int64(0))
	f.Add("x", 1000, 100, int64(5))
	f.Fuzz(func(t *testing.T, stream string, n, size int, match int64) {
		if stream == "" || n <= 0 || n > 1000 || size < 0 || size > 8<<10 {
			return
		}
		m := &strandv1.AppendRequest{Stream: stream}
		if match > 0 {
			seq := uint64(match)
			m.MatchSeqNum = &seq
		}
		for range n {
			m.Records = append(m.Records, &strandv1.AppendRecord{Body: make([]byte, size), Headers: []*strandv1.Header{{Name: []byte("h")}}})
		}
		pb, err := proto.Marshal(m)
		if err != nil {
			return // not valid UTF-8
		}
		js, err := protojson.Marshal(m)
		if err != nil {
			return
		}
		for name, b := range map[string][]byte{"protobuf": pb, "JSON": js} {
			got, err := server.FirstStream(name == "JSON", b[:min(len(b), 64<<10)])
			if err != nil || got != stream {
				t.Fatalf("%s of %d bytes: first stream %q, %v; want %q", name, len(b), got, err, stream)
			}
		}
	})
}

// FuzzFirstStream: the prefix parsers take any bytes, and refuse what
// they refuse with one of the two sentinels (a client learns why).
func FuzzFirstStream(f *testing.F) {
	f.Add([]byte(`{"stream":"a/b","records":[`), true)
	f.Add([]byte(`{"records":[],"stream":"a"}`), true)
	f.Add([]byte("\x0a\x03a/b\x12"), false)
	f.Add([]byte("\x12\x00"), false)
	f.Fuzz(func(t *testing.T, b []byte, isJSON bool) {
		_, err := server.FirstStream(isJSON, b)
		if err != nil && !errors.Is(err, server.ErrStreamNotFirst) && !errors.Is(err, server.ErrMalformedAppend) {
			t.Fatalf("%q: %v, want ErrStreamNotFirst or ErrMalformedAppend", b, err)
		}
	})
}

// TestAppendSessionStreamFirst (ADR 0074): an AppendSession message over
// 64 KiB is authorized on the stream it names first before the rest of it
// is read: the client's messages of 100 KiB land, and a session whose
// JSON message names its stream after its records ends invalid_argument.
func TestAppendSessionStreamFirst(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := newNode(t, newMeta(t), "star-0", true, nil)
	_, err := newClient(t, n, adminTok).CreateStream(ctx, "logs/s", client.CreateOptions{})
	must(t, err)
	s, err := newClient(t, n, appendTok).OpenAppendSession(ctx, "logs/s")
	must(t, err)
	defer s.Close()
	rs := make([]client.Record, 100)
	for i := range rs {
		rs[i] = client.Record{Body: bytes.Repeat([]byte("s"), 1<<10)}
	}
	for range 3 {
		must(t, s.Submit(rs, client.AppendOptions{}))
	}
	for range 3 {
		if a := <-s.Acks(); a.Err != nil {
			t.Fatalf("a 100 KiB session message naming its stream first: %v", a.Err)
		}
	}
	body := bigJSON("logs/s", false, "")
	env := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(body)))
	code := sessionCode(t, n, appendTok, append(env, body...))
	if code != "invalid_argument" {
		t.Fatalf("a session message naming its stream after 100 KiB of records: %q, want invalid_argument", code)
	}
}

// sessionCode posts body (enveloped JSON messages) as an AppendSession
// over Connect and returns its end's error code ("" for none).
func sessionCode(t *testing.T, n *node, token string, body []byte) string {
	t.Helper()
	req, err := http.NewRequest("POST", n.ts.URL+"/strand.v1.StrandService/AppendSession", bytes.NewReader(body))
	must(t, err)
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("Authorization", "Bearer "+token)
	tr := &http.Transport{Protocols: new(http.Protocols)} // h2c: a bidi stream needs HTTP/2
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr}).Do(req)
	must(t, err)
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	for len(raw) >= 5 {
		size := int(binary.BigEndian.Uint32(raw[1:5]))
		if 5+size > len(raw) {
			break
		}
		if raw[0]&2 != 0 { // end of stream
			var end struct{ Error *struct{ Code string } }
			must(t, json.Unmarshal(raw[5:5+size], &end))
			if end.Error == nil {
				return ""
			}
			return end.Error.Code
		}
		raw = raw[5+size:]
	}
	t.Fatalf("no end of stream in the answer (status %d)", res.StatusCode)
	return ""
}
