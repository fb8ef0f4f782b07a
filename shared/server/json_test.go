package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// post is what curl does: a JSON POST to /strand.v1.StrandService/<Method>.
func post(t *testing.T, n *node, token, method, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest("POST", n.ts.URL+"/strand.v1.StrandService/"+method, strings.NewReader(body))
	must(t, err)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	must(t, err)
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: response %q is not JSON: %v", method, raw, err)
	}
	return res.StatusCode, out
}

func TestJSONOverPlainHTTP(t *testing.T) {
	n := newNode(t, newMeta(t), "star-0", true, nil)
	code, out := post(t, n, adminTok, "CreateStream", `{"name":"logs/j","storageClass":"STORAGE_CLASS_EXPRESS"}`)
	if code != 200 || out["stream"].(map[string]any)["storageClass"] != "STORAGE_CLASS_EXPRESS" {
		t.Fatalf("create: %d %v", code, out)
	}
	// "aGVsbG8=" is base64 of "hello" (echo -n hello | base64).
	code, out = post(t, n, adminTok, "Append", `{"stream":"logs/j","records":[{"body":"aGVsbG8="},{"body":"d29ybGQ=","headers":[{"name":"aw==","value":"dg=="}]}]}`)
	if code != 200 || out["endSeqNum"] != "2" || out["nextSeqNum"] != "2" {
		t.Fatalf("append: %d %v", code, out)
	}
	code, out = post(t, n, adminTok, "Read", `{"stream":"logs/j","seqNum":"0","count":10}`)
	recs, _ := out["records"].([]any)
	if code != 200 || len(recs) != 2 || recs[0].(map[string]any)["body"] != "aGVsbG8=" || out["nextSeqNum"] != "2" {
		t.Fatalf("read: %d %v", code, out)
	}
	if h := recs[1].(map[string]any)["headers"].([]any)[0].(map[string]any); h["name"] != "aw==" {
		t.Fatalf("header %v", h)
	}
	code, out = post(t, n, adminTok, "Read", `{"stream":"logs/j","tailOffset":1}`)
	if recs, _ := out["records"].([]any); code != 200 || len(recs) != 1 || recs[0].(map[string]any)["seqNum"] != "1" {
		t.Fatalf("tail read: %d %v", code, out)
	}
	code, out = post(t, n, adminTok, "CheckTail", `{"stream":"logs/j"}`)
	if code != 200 || out["nextSeqNum"] != "2" {
		t.Fatalf("check tail: %d %v", code, out)
	}
	// The match_seq_num miss is failed_precondition with the tail in a detail.
	code, out = post(t, n, adminTok, "Append", `{"stream":"logs/j","matchSeqNum":0,"records":[{"body":""}]}`)
	if code != 400 || out["code"] != "failed_precondition" || !strings.Contains(out["message"].(string), "tail 2") {
		t.Fatalf("mismatch: %d %v", code, out)
	}
	if d, _ := out["details"].([]any); len(d) != 1 || d[0].(map[string]any)["type"] != "strand.v1.Tail" {
		t.Fatalf("mismatch details: %v", out["details"])
	}
	// Bad input: invalid_argument with the reason.
	for body, reason := range map[string]string{
		`{"stream":"logs/j","records":[]}`:                               "empty batch",
		`{"stream":"","records":[{"body":""}]}`:                          "empty stream name",
		`{"stream":"logs/j","records":[{"timestampMs":"-5"}]}`:           "negative",
		`{"stream":"logs/j","records":[{"headers":[{"value":"dg=="}]}]}`: "empty name",
		`{"stream":"logs/j","records":[{"body":"not base64!"}]}`:         "",
		`{"stream":"logs/j","bogus":1}`:                                  "",
		`not json`:                                                       "",
	} {
		code, out := post(t, n, adminTok, "Append", body)
		if code != 400 || out["code"] != "invalid_argument" || !strings.Contains(out["message"].(string), reason) {
			t.Errorf("%s: %d %v (want invalid_argument with %q)", body, code, out, reason)
		}
	}
	// No token: unauthenticated, and nothing was appended.
	code, out = post(t, n, "", "Append", `{"stream":"logs/j","records":[{"body":""}]}`)
	if code != 401 || out["code"] != "unauthenticated" {
		t.Fatalf("no token: %d %v", code, out)
	}
	if _, out = post(t, n, readTok, "CheckTail", `{"stream":"logs/j"}`); out["nextSeqNum"] != "2" {
		t.Fatalf("tail after refused calls: %v", out)
	}
	code, out = post(t, n, adminTok, "ListStreams", `{"prefix":"logs/"}`)
	if code != 200 || len(out["streams"].([]any)) != 1 {
		t.Fatalf("list: %d %v", code, out)
	}
}
