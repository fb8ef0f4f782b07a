package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// docCommand is a command line in a doc: "strand PATH ARGS...", in a code
// block or a code span, as "go run ./cmd/strand ...", "./strand ..." or
// plain "strand ...".
var docCommand = regexp.MustCompile(`\bstrand ([a-z][a-z-]*(?: [a-z][a-z-]*)?)`)

// docFlag is a flag named in the rest of such a line.
var docFlag = regexp.MustCompile(`(?:^|\s)--([a-z0-9][a-z0-9-]*)`)

// docCommandEnd ends a command within a line: a code span's end, a pipe,
// a list, a command substitution or its end, a shell comment.
var docCommandEnd = regexp.MustCompile("`|\\||;|&&|\\$\\(|\\)| #")

// namedFlag is one flag a doc names with the command it names it for.
type namedFlag struct {
	where, line, cmd, flag string
}

// flagsNamed returns every "--flag" that text names after "strand CMD"
// on one line, with the command it resolves to under root. Words after
// strand that are no command (prose: "strand is ...") are skipped, as is
// a command with subcommands followed by a word that is none of them
// (`strand completion bash|zsh`: the flags are the shell's).
func flagsNamed(root *cobra.Command, where, text string) []namedFlag {
	var out []namedFlag
	for i, line := range strings.Split(text, "\n") {
		for _, m := range docCommand.FindAllStringSubmatchIndex(line, -1) {
			words := strings.Fields(line[m[2]:m[3]])
			cmd, rest, err := root.Find(words)
			if err != nil || cmd == root {
				continue
			}
			if len(rest) > 0 && cmd.HasSubCommands() {
				continue
			}
			tail := line[m[1]:]
			if e := docCommandEnd.FindStringIndex(tail); e != nil {
				tail = tail[:e[0]]
			}
			for _, f := range docFlag.FindAllStringSubmatch(tail, -1) {
				out = append(out, namedFlag{where: where + ":" + strconv.Itoa(i+1), line: strings.TrimSpace(line), cmd: cmd.CommandPath(), flag: f[1]})
			}
		}
	}
	return out
}

// hasFlag reports whether cmd takes --name (its own, inherited or
// cobra's help).
func hasFlag(root *cobra.Command, path, name string) bool {
	cmd, _, err := root.Find(strings.Fields(strings.TrimPrefix(path, "strand")))
	if err != nil {
		return false
	}
	return cmd.Flags().Lookup(name) != nil || cmd.InheritedFlags().Lookup(name) != nil || name == "help"
}

// TestDocsNameOnlyRealFlags: every flag README.md, docs/*.md and
// docs/performance/*.md name after
// a strand command on one line ("go run ./cmd/strand read hello --seq 1",
// "`strand append --timestamp T`"), and every flag a command's --help
// examples name, is a flag of that command: a reader who copies it gets
// no "unknown flag" (the first-hour walk; TestCLIDocHeadings checks the
// converse, that cli.md names every flag).
func TestDocsNameOnlyRealFlags(t *testing.T) {
	root := newRoot()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	// The docs a reader runs commands from: the top-level pages and the
	// performance pages' reproduction commands (design records and ADRs
	// are history).
	var files []string
	for _, g := range []string{"*.md", filepath.Join("performance", "*.md")} {
		m, err := filepath.Glob(filepath.Join("..", "..", "docs", g))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	files = append(files, filepath.Join("..", "..", "README.md"))
	var named []namedFlag
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		named = append(named, flagsNamed(root, filepath.Base(f), string(b))...)
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Example != "" {
			named = append(named, flagsNamed(root, c.CommandPath()+" --help", c.Example)...)
		}
		named = append(named, flagsNamed(root, c.CommandPath()+" --help", c.Long)...)
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	t.Logf("%d flags named after strand commands", len(named))
	if len(named) < 100 {
		t.Fatalf("found only %d flags named after strand commands; did the docs' shape change?", len(named))
	}
	for _, n := range named {
		if !hasFlag(root, n.cmd, n.flag) {
			t.Errorf("%s: %s has no flag --%s: %s", n.where, n.cmd, n.flag, n.line)
		}
	}
}
