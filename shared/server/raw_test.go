package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/strandlog/strand/shared/client"
)

// TestRawFormat: with Strand-Format: raw, JSON carries bodies as text both
// ways, seq 0 is present, and a ReadSession over Connect streaming JSON
// answers the same shape. Issue 20 item 6.
func TestRawFormat(t *testing.T) {
	n := newNode(t, newMeta(t), "s1", true, nil)
	c := newClient(t, n, adminTok)
	if _, err := c.CreateStream(context.Background(), "raw", client.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	post := func(path, ct, format string, body []byte) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", n.ts.URL+"/strand.v1.StrandService/"+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+adminTok)
		req.Header.Set("Content-Type", ct)
		if format != "" {
			req.Header.Set("Strand-Format", format)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	js := "application/json"
	if code, got := post("Append", js, "raw", []byte(`{"stream":"raw","records":[{"body":"zero","headers":[{"name":"k","value":"v"}]},{"bodyBase64":"/w=="}]}`)); code != 200 || !strings.Contains(got, `"startSeqNum":0,"endSeqNum":2`) {
		t.Fatalf("raw append: %d %s", code, got)
	}
	code, got := post("Read", js, "raw", []byte(`{"stream":"raw"}`))
	if code != 200 || !strings.Contains(got, `{"seqNum":0,"timestampMs":`) ||
		!strings.Contains(got, `"headers":[{"name":"k","value":"v"}],"body":"zero"}`) || !strings.Contains(got, `"bodyBase64":"/w=="`) {
		t.Fatalf("raw read: %d %s", code, got)
	}
	// Without the header: the protobuf JSON mapping, as before.
	if code, got := post("Read", js, "", []byte(`{"stream":"raw"}`)); code != 200 || !strings.Contains(got, `"body":"emVybw=="`) {
		t.Fatalf("base64 read: %d %s", code, got)
	}
	if code, got := post("Read", js, "hex", []byte(`{"stream":"raw"}`)); code != 400 || !strings.Contains(got, "Strand-Format") {
		t.Fatalf("unknown format: %d %s", code, got)
	}
	// Connect streaming JSON: one enveloped request, enveloped answers.
	env := func(b []byte) []byte {
		out := make([]byte, 5, 5+len(b))
		binary.BigEndian.PutUint32(out[1:], uint32(len(b)))
		return append(out, b...)
	}
	code, got = post("ReadSession", "application/connect+json", "raw", env([]byte(`{"stream":"raw","noTail":true}`)))
	if code != 200 || !strings.Contains(got, `"body":"zero"`) || !strings.Contains(got, `"seqNum":0`) {
		t.Fatalf("raw read session: %d %q", code, got)
	}
}
