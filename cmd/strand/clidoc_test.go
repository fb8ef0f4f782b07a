package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// cliHeading is a command's heading in docs/cli.md: "### strand PATH".
var cliHeading = regexp.MustCompile("(?m)^### `?strand ([a-z -]+?)`?\\s*$")

// TestCLIDocHeadings: every command of the CLI (its full path under
// strand) has a heading "### strand PATH" in docs/cli.md, followed by its
// synopsis in a code block and listed in the Commands table with a link to
// it, and every such heading names a command that
// exists (issue 34: a reader finds a command by its name). cobra's own
// help command and the shells under completion are cobra's and left out.
func TestCLIDocHeadings(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	root := newRoot()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var commands []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || c.Name() == "completion" {
				continue
			}
			commands = append(commands, strings.TrimPrefix(sub.CommandPath(), "strand "))
			walk(sub)
		}
	}
	walk(root)
	if len(commands) < 10 {
		t.Fatalf("found only %d commands: %v", len(commands), commands)
	}
	headings := map[string]string{}
	text := string(doc)
	for _, m := range cliHeading.FindAllStringSubmatchIndex(text, -1) {
		name := text[m[2]:m[3]]
		if _, dup := headings[name]; dup {
			t.Errorf("docs/cli.md: two headings for strand %s", name)
		}
		next := len(text)
		if n := strings.Index(text[m[1]:], "\n#"); n >= 0 {
			next = m[1] + n
		}
		headings[name] = text[m[1]:next]
	}
	for _, c := range commands {
		body, ok := headings[c]
		if !ok {
			t.Errorf("docs/cli.md has no heading \"### strand %s\"", c)
			continue
		}
		if link := "[`strand " + c + "`](#strand-" + strings.ReplaceAll(c, " ", "-") + ")"; !strings.Contains(text, link) {
			t.Errorf("docs/cli.md: the Commands table has no row %s", link)
		}
		if !strings.Contains(body, "```\nstrand "+c) {
			t.Errorf("docs/cli.md: \"### strand %s\" does not open with its synopsis (a code block starting \"strand %s\")", c, c)
		}
	}
	for h := range headings {
		if !slices.Contains(commands, h) {
			t.Errorf("docs/cli.md has a heading \"### strand %s\", which is no command (commands: %v)", h, commands)
		}
	}
}
