package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestOneJSONShape: `strand read --format json` prints one record shape,
// every field present (seq 0 too), the same the API answers with
// Strand-Format: raw; check-tail --json and ls --json print the API's
// field names. Issue 20 item 6: the CLI printed seq_num/body while the
// API printed seqNum (omitted for 0) and base64.
func TestOneJSONShape(t *testing.T) {
	d := startDev(t)
	env := d.env()
	mustStrand(t, env, "", "create", "shape")
	mustStrand(t, env, "first\n\nthird\n", "append", "shape")
	r := strand(t, env, "", "read", "shape", "--format", "json")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	shape := regexp.MustCompile(`^\{"seqNum":(\d+),"timestampMs":\d+,"headers":\[\],"body":"([a-z]*)"\}$`)
	if r.code != 0 || len(lines) != 3 {
		t.Fatalf("read --format json: %+v", r)
	}
	for i, want := range []string{"first", "", "third"} {
		m := shape.FindStringSubmatch(lines[i])
		if m == nil || m[1] != string(rune('0'+i)) || m[2] != want {
			t.Fatalf("line %d: %s", i, lines[i])
		}
	}
	// The API with Strand-Format: raw answers the same records.
	req, _ := http.NewRequest("POST", d.endpoint+"/strand.v1.StrandService/Read", strings.NewReader(`{"stream":"shape"}`))
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Strand-Format", "raw")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var api struct{ Records []json.RawMessage }
	if err := json.Unmarshal(body, &api); err != nil || len(api.Records) != 3 {
		t.Fatalf("API raw read: %s %v", body, err)
	}
	for i, rec := range api.Records {
		var compact bytes.Buffer
		_ = json.Compact(&compact, rec)
		if compact.String() != lines[i] {
			t.Fatalf("record %d: CLI %s, API %s", i, lines[i], compact.String())
		}
	}
	if r := strand(t, env, "", "check-tail", "shape", "--json"); r.code != 0 || !regexp.MustCompile(`^\{"nextSeqNum":3,"lastTimestampMs":\d+\}\n$`).MatchString(r.stdout) {
		t.Fatalf("check-tail --json: %+v", r)
	}
	if r := strand(t, env, "", "ls", "--json"); r.code != 0 || !strings.Contains(r.stdout, `{"name":"shape","id":"`) || !strings.Contains(r.stdout, `"storageClass":"STORAGE_CLASS_STANDARD"`) {
		t.Fatalf("ls --json: %+v", r)
	}
}
