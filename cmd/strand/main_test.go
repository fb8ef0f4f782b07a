package main

import (
	"bytes"
	"errors"
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
