package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/client"
)

// readJSON is one line of strand read --format json.
type readJSON struct {
	SeqNum      uint64 `json:"seqNum"`
	TimestampMs int64  `json:"timestampMs"`
	Headers     []struct {
		Name, Value string
	} `json:"headers"`
	Body string `json:"body"`
}

func readBack(t *testing.T, env []string, stream string) []readJSON {
	t.Helper()
	r := mustStrand(t, env, "", "read", stream, "--format", "json")
	var out []readJSON
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var j readJSON
		if err := json.Unmarshal([]byte(l), &j); err != nil {
			t.Fatalf("read line %q: %v", l, err)
		}
		out = append(out, j)
	}
	return out
}

// TestAppendHeadersTimestampsJSON: --header and --timestamp reach every
// record, a client-require stream can be written from the CLI, and a
// read's JSON output appends as it is (--format json). Issue 34: the CLI
// could append neither headers nor timestamps. Also: a successful append
// prints nothing on stderr and counts "1 record" (it printed the producer
// and "(resume: ...)" after every append, and "1 records").
func TestAppendHeadersTimestampsJSON(t *testing.T) {
	d := startDev(t)
	env := d.env()
	mustStrand(t, env, "", "create", "sensor", "--timestamping", "client-require")
	r := strand(t, env, "21\n", "append", "sensor")
	if r.code == 0 || !strings.Contains(r.stderr, "--timestamp") {
		t.Fatalf("append without timestamps to a client-require stream: exit %d, stderr %q; want a hint naming --timestamp", r.code, r.stderr)
	}
	r = mustStrand(t, env, "21\n", "append", "sensor", "--timestamp", "2023-11-14T22:13:20Z", "--header", "unit=celsius", "--header", "room=a=b")
	if r.stderr != "" || !strings.Contains(r.stdout, "appended 1 record to sensor") {
		t.Fatalf("append printed stdout %q, stderr %q; want \"appended 1 record\" and a quiet stderr", r.stdout, r.stderr)
	}
	got := readBack(t, env, "sensor")
	if len(got) != 1 || got[0].TimestampMs != 1700000000000 || got[0].Body != "21" || len(got[0].Headers) != 2 ||
		got[0].Headers[0].Name != "unit" || got[0].Headers[0].Value != "celsius" || got[0].Headers[1].Name != "room" || got[0].Headers[1].Value != "a=b" {
		t.Fatalf("read back %+v", got)
	}

	mustStrand(t, env, "", "create", "copy", "--timestamping", "client-require")
	in := mustStrand(t, env, "", "read", "sensor", "--format", "json").stdout +
		"\n" + `{"bodyBase64":"AAE=","timestampMs":1700000001000,"headers":[{"name":"k","value":"v"}]}` + "\n"
	mustStrand(t, env, in, "append", "copy", "--format", "json")
	cp := readBack(t, env, "copy")
	if len(cp) != 2 || cp[0].Body != "21" || cp[0].TimestampMs != 1700000000000 || len(cp[0].Headers) != 2 || cp[1].TimestampMs != 1700000001000 {
		t.Fatalf("copy read back %+v", cp)
	}
	r = strand(t, env, "{\"body\":\"ok\",\"timestampMs\":1700000002000}\nnot json\n", "append", "copy", "--format", "json")
	if r.code == 0 || !strings.Contains(r.stderr, "line 2 is not a JSON record") || !strings.Contains(r.stderr, "; 1 record before it appended") {
		t.Fatalf("bad JSON line: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestAppendToStoppedServerFailsFast: every client command against a
// stopped server fails at once with the hint. Issue 34: append waited out
// its 60 s retry budget in silence.
func TestAppendToStoppedServerFailsFast(t *testing.T) {
	d := startDev(t)
	env := d.env()
	mustStrand(t, env, "", "create", "s")
	_ = d.cmd.Process.Kill()
	<-d.done
	for _, args := range [][]string{{"append", "s"}, {"read", "s"}, {"ls"}, {"describe", "s"}, {"trim", "s", "1"}, {"fence", "s", "x"}, {"check-tail", "s"}} {
		start := time.Now()
		r := strand(t, env, "x\n", args...)
		if r.code == 0 || !strings.Contains(r.stderr, "is the server running?") {
			t.Errorf("strand %v against a stopped server: exit %d, stderr %q", args, r.code, r.stderr)
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("strand %v took %v to fail against a stopped server", args, el)
		}
		if strings.Contains(r.stderr, "resume") {
			t.Errorf("strand %v: stderr speaks of resuming though nothing was sent: %q", args, r.stderr)
		}
	}
	// --retry-for given: the command waits that long for a server that
	// may be starting.
	start := time.Now()
	if r := strand(t, env, "x\n", "append", "s", "--retry-for", "1500ms"); r.code == 0 {
		t.Fatal("append to a stopped server succeeded")
	}
	if el := time.Since(start); el < time.Second {
		t.Errorf("append --retry-for 1500ms gave up after %v", el)
	}
}

// source drains src.
func source(t *testing.T, src recordSource) ([]client.Record, error) {
	var out []client.Record
	for {
		r, err := src.next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
}

func TestNewSource(t *testing.T) {
	src, err := newSource(strings.NewReader("a\nb\n"), "text", []string{"k=v"}, "1700000000000")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := source(t, src)
	if err != nil || len(recs) != 2 || recs[1].TimestampMs != 1700000000000 || string(recs[1].Headers[0].Value) != "v" {
		t.Fatalf("text: %+v %v", recs, err)
	}
	src, _ = newSource(strings.NewReader(`{"body":"x","headers":[{"name":"a","value":"1"}]}`+"\n\n"+`{"seqNum":9,"body":"y","timestampMs":5}`+"\n"+`{"seqNum":10,"headers":[{"name":"","value":"x"}],"body":"fence"}`), "json", []string{"k=v"}, "7")
	recs, err = source(t, src)
	if err != nil || len(recs) != 2 || recs[0].TimestampMs != 7 || len(recs[0].Headers) != 2 || recs[1].TimestampMs != 5 || string(recs[1].Body) != "y" {
		t.Fatalf("json: %+v %v", recs, err)
	}
	for _, bad := range []struct{ format, header, ts string }{
		{"xml", "", ""}, {"text", "novalue", ""}, {"text", "=v", ""}, {"text", "", "yesterday"}, {"text", "", "-5"},
	} {
		var hs []string
		if bad.header != "" {
			hs = []string{bad.header}
		}
		if _, err := newSource(strings.NewReader(""), bad.format, hs, bad.ts); !errors.Is(err, ErrInput) {
			t.Errorf("%+v: %v, want ErrInput", bad, err)
		}
	}
	if _, err := parseJSONRecord([]byte(`{"body":"x","timestampMs":-1}`), 1, 0); !errors.Is(err, ErrInput) {
		t.Errorf("negative timestamp: %v", err)
	}
}

// FuzzParseJSONRecord: any line is a record or an ErrInput, never a panic;
// a record parsed re-encodes (as read prints it) and parses back the same.
func FuzzParseJSONRecord(f *testing.F) {
	for _, s := range []string{`{"body":"x"}`, `{"bodyBase64":"AAE=","headers":[{"name":"k","valueBase64":"/w=="}],"timestampMs":3}`, `{"seqNum":1}`, `[]`, `{"body":1}`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := parseJSONRecord(line, 1, 0)
		if err != nil {
			if !errors.Is(err, ErrInput) {
				t.Fatalf("%q: %v is not ErrInput", line, err)
			}
			return
		}
		var buf bytes.Buffer
		p, _ := newPrinter(&buf, "json", false)
		if err := p.print([]client.Record{r}); err != nil {
			t.Fatal(err)
		}
		_ = p.w.Flush()
		r2, err := parseJSONRecord(bytes.TrimSpace(buf.Bytes()), 1, 0)
		if err != nil || !bytes.Equal(r2.Body, r.Body) || r2.TimestampMs != r.TimestampMs || len(r2.Headers) != len(r.Headers) {
			t.Fatalf("%q -> %q -> %+v, %v; want %+v", line, buf.Bytes(), r2, err, r)
		}
	})
}
