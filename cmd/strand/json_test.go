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
	if r := strand(t, env, "", "check-tail", "shape", "--json"); r.code != 0 || !regexp.MustCompile(`^\{"nextSeqNum":3,"lastTimestampMs":\d+,"trimSeqNum":0,"fenced":false\}\n$`).MatchString(r.stdout) {
		t.Fatalf("check-tail --json: %+v", r)
	}
	// The text names the fields as the JSON does (issue 34: next_seq_num
	// in text, nextSeqNum in JSON).
	if r := strand(t, env, "", "check-tail", "shape"); r.code != 0 || !regexp.MustCompile(`^nextSeqNum +3\nlastTimestampMs +\d+\ntrimSeqNum +0\nfenced +false\n$`).MatchString(r.stdout) {
		t.Fatalf("check-tail: %+v", r)
	}
	// Every field, timestamping included (issue 34: ls --json left it out).
	if r := strand(t, env, "", "ls", "--json"); r.code != 0 || !strings.Contains(r.stdout, `{"name":"shape","id":"`) || !strings.Contains(r.stdout, `"storageClass":"STORAGE_CLASS_STANDARD"`) ||
		!strings.Contains(r.stdout, `"timestamping":{"mode":"TIMESTAMPING_MODE_CLIENT_PREFER","uncapped":false}`) {
		t.Fatalf("ls --json: %+v", r)
	}
}

// TestDescribe: describe shows a stream's configuration, its trim point
// and whether it is fenced (never the token), and its tail, in text and
// JSON under the same names. Issue 34: there was no describe.
func TestDescribe(t *testing.T) {
	d := startDev(t)
	env := d.env()
	mustStrand(t, env, "", "create", "d", "--retention", "72h", "--timestamping", "arrival")
	mustStrand(t, env, "a\nb\nc\n", "append", "d")
	mustStrand(t, env, "", "fence", "d", "secret-token")
	mustStrand(t, env, "", "trim", "d", "2", "--fence-token", "secret-token")
	r := mustStrand(t, env, "", "describe", "d")
	for _, want := range []string{"name  ", "retention  ", "72h0m0s", "timestamping  ", "arrival, capped", "trimSeqNum  ", "fenced  ", "nextSeqNum  "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("describe lacks %q:\n%s", want, r.stdout)
		}
	}
	if !regexp.MustCompile(`(?m)^trimSeqNum +2$`).MatchString(r.stdout) || !regexp.MustCompile(`(?m)^fenced +true$`).MatchString(r.stdout) ||
		!regexp.MustCompile(`(?m)^nextSeqNum +5$`).MatchString(r.stdout) || strings.Contains(r.stdout, "secret-token") {
		t.Fatalf("describe:\n%s", r.stdout)
	}
	r = mustStrand(t, env, "", "describe", "d", "--json")
	var j struct {
		Stream struct {
			Name        string `json:"name"`
			RetentionMs int64  `json:"retentionMs"`
		} `json:"stream"`
		Tail struct {
			NextSeqNum uint64 `json:"nextSeqNum"`
			TrimSeqNum uint64 `json:"trimSeqNum"`
			Fenced     bool   `json:"fenced"`
		} `json:"tail"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil || j.Stream.Name != "d" || j.Stream.RetentionMs != 72*3600*1000 ||
		j.Tail.NextSeqNum != 5 || j.Tail.TrimSeqNum != 2 || !j.Tail.Fenced || strings.Contains(r.stdout, "secret-token") {
		t.Fatalf("describe --json: %q (%v)", r.stdout, err)
	}
	if r := strand(t, env, "", "describe", "nope"); r.code == 0 || !strings.Contains(r.stderr, "strand create") {
		t.Fatalf("describe of a missing stream: %+v", r)
	}
}

// TestVersion: --version prints the build (issue 34: there was none).
func TestVersion(t *testing.T) {
	r := mustStrand(t, nil, "", "--version")
	if !regexp.MustCompile(`^strand \S.*, go1\.\d+.* \w+/\w+\n$`).MatchString(r.stdout) {
		t.Fatalf("--version printed %q", r.stdout)
	}
}

// TestDevMetrics: strand dev serves the Prometheus exposition,
// with per-call codes, read volumes and the Go runtime's and process's
// series, and says where (issue 34: metrics were off in strand dev, and
// nothing measured reads, sessions or codes).
func TestDevMetrics(t *testing.T) {
	// A free port, not 9090: other tests may run strand dev at once.
	d := startDev(t, "--admin-addr", "127.0.0.1:0")
	m := regexp.MustCompile(`Metrics: (http://\S+/metrics)`).FindStringSubmatch(d.out.String())
	if m == nil {
		t.Fatalf("strand dev did not say where its metrics are: %q", d.out.String())
	}
	env := d.env()
	mustStrand(t, env, "", "create", "m")
	mustStrand(t, env, "a\nb\n", "append", "m")
	mustStrand(t, env, "", "read", "m")
	strand(t, env, "", "describe", "nope")
	res, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{`strand_calls_total{code="ok",procedure="CreateStream"} 1`, `strand_calls_total{code="not_found",procedure="GetStream"} 1`,
		`strand_sessions_open{procedure="ReadSession"} 0`, "strand_read_records_total 2", "strand_appends_total", "go_goroutines ", "process_cpu_seconds_total "} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
