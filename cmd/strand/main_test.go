package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/client"
)

func TestExplainGivesHints(t *testing.T) {
	err := connect.NewError(connect.CodeUnauthenticated, errors.New("no token"))
	if got := explain(err); !strings.Contains(got, "STRAND_TOKEN") {
		t.Fatalf("explain: %q", got)
	}
	if got := explain(connect.NewError(connect.CodeUnavailable, errors.New("dial"))); !strings.Contains(got, "--endpoint") {
		t.Fatalf("explain: %q", got)
	}
}

func TestEveryCommandHasHelp(t *testing.T) {
	root := newRoot()
	for _, c := range root.Commands() {
		if c.Short == "" {
			t.Errorf("%s has no short help", c.Name())
		}
	}
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"read", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--tail-offset", "--timestamp", "--format", "STRAND_ENDPOINT"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("read --help lacks %q:\n%s", want, out.String())
		}
	}
}

func TestStartFlags(t *testing.T) {
	s := startFlags{timestamp: "2024-01-02T15:04:05Z"}
	if _, err := s.start(fromZero()); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []startFlags{{seq: "-1"}, {timestamp: "yesterday"}, {tailOffset: "x"}} {
		if _, err := bad.start(fromZero()); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func fromZero() client.Start { return client.FromSeq(0) }

// countingWriter counts Write calls.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes++
	return c.Buffer.Write(p)
}

// A read prints through one large buffer: 10000 records of 100 bytes take
// a handful of writes to the output (not one per record, nor one per
// 4 KiB), every body on its line, in order; a tail flushes each batch.
func TestPrinterBatchesWrites(t *testing.T) {
	var recs []client.Record
	for i := range 10000 {
		recs = append(recs, client.Record{Seq: uint64(i), Body: fmt.Appendf(nil, "%099d", i)})
	}
	out := &countingWriter{}
	p, err := newPrinter(out, "text", false)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(recs); i += 1000 {
		if err := p.print(recs[i : i+1000]); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.w.Flush(); err != nil {
		t.Fatal(err)
	}
	if max := 1_000_000/printBuffer + 2; out.writes > max {
		t.Fatalf("%d writes for 1 MB of output, want at most %d", out.writes, max)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 10000 || lines[0] != fmt.Sprintf("%099d", 0) || lines[9999] != fmt.Sprintf("%099d", 9999) {
		t.Fatalf("%d lines", len(lines))
	}
	tail := &countingWriter{}
	p, _ = newPrinter(tail, "text", true)
	if err := p.print(recs[:1]); err != nil || tail.String() != fmt.Sprintf("%099d\n", 0) {
		t.Fatalf("tail printer did not flush its batch: %q %v", tail.String(), err)
	}
}
