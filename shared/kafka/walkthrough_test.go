package kafka_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// docBlock is one fenced block of docs/kafka.md's Walkthrough.
type docBlock struct {
	lang string // "sh" or "text"
	body string
}

// walkthrough returns the fenced blocks of the "## Walkthrough" section.
func walkthrough(t *testing.T) []docBlock {
	t.Helper()
	b, err := os.ReadFile("../../docs/kafka.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n## Walkthrough\n")
	if start < 0 {
		t.Fatal("docs/kafka.md has no \"## Walkthrough\" section")
	}
	section := doc[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	var out []docBlock
	lines := strings.Split(section, "\n")
	for i := 0; i < len(lines); i++ {
		lang, ok := strings.CutPrefix(lines[i], "```")
		if !ok || lang == "" {
			continue
		}
		var body []string
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			body = append(body, lines[i])
		}
		out = append(out, docBlock{lang: lang, body: strings.Join(body, "\n") + "\n"})
	}
	return out
}

// TestKafkaWalkthrough runs docs/kafka.md's Walkthrough word for word
// (each sh block with bash, the test server's Kafka address in place of
// 127.0.0.1:9092, which other servers on this machine may hold) and
// checks each block's output against the text block after it.
func TestKafkaWalkthrough(t *testing.T) {
	kcatBin(t)
	blocks := walkthrough(t)
	n, _ := startNode(t)
	ran := 0
	for i, b := range blocks {
		if b.lang != "sh" {
			continue
		}
		script := strings.ReplaceAll(b.body, "127.0.0.1:9092", n.KafkaAddr())
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Fatalf("block %d:\n%s\nfailed: %v\nstderr: %s", i, b.body, err, errb.String())
		}
		ran++
		if i+1 < len(blocks) && blocks[i+1].lang == "text" && out.String() != blocks[i+1].body {
			t.Fatalf("block %d:\n%s\nprinted:\n%s\nthe doc says:\n%s", i, b.body, out.String(), blocks[i+1].body)
		}
	}
	if ran < 3 {
		t.Fatalf("ran %d sh blocks of the walkthrough, want at least 3", ran)
	}
}
