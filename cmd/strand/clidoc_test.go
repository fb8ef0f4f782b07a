package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// cliHeading is a command's heading in docs/cli.md: "### strand PATH".
var cliHeading = regexp.MustCompile("(?m)^### `?strand ([a-z -]+?)`?\\s*$")

// cliDocCellMax is the longest table cell docs/cli.md may hold.
const cliDocCellMax = 120

// nextHeading ends a command's section.
var nextHeading = regexp.MustCompile(`\n##+ `)

// clientFlagNames are documented once, in cli.md's "Finding the server".
var clientFlagNames = []string{"endpoint", "token", "token-file", "retry-for", "trust-leader", "help"}

// TestCLIDocHeadings: every command of the CLI (its full path under
// strand) has a section "### strand PATH" in docs/cli.md that opens with
// its synopsis in a code block and names each of the command's own flags
// (bench's model and price flags aside), and a row in the Commands table
// linking to it; every such heading names a command that exists; no
// table cell is longer than cliDocCellMax (issue 34: a reader finds a
// command by its name, details below the tables). cobra's own help
// command and the shells under completion are cobra's and left out. It
// failed before cli.md was rewritten: no command had a heading.
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
	flags := map[string][]string{}
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || c.Name() == "completion" {
				continue
			}
			name := strings.TrimPrefix(sub.CommandPath(), "strand ")
			commands = append(commands, name)
			sub.LocalFlags().VisitAll(func(f *pflag.Flag) {
				if !f.Hidden && !slices.Contains(clientFlagNames, f.Name) {
					flags[name] = append(flags[name], f.Name)
				}
			})
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
		if n := nextHeading.FindStringIndex(text[m[1]:]); n != nil {
			next = m[1] + n[0]
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
		// bench's dozens of model and price flags are left to
		// `strand bench --help`, as its section says.
		if c == "bench" {
			continue
		}
		for _, f := range flags[c] {
			if !strings.Contains(body, "--"+f) {
				t.Errorf("docs/cli.md: \"### strand %s\" does not name its flag --%s", c, f)
			}
		}
	}
	// Short cells: details go below the table (issue 34).
	for i, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "|") {
			continue
		}
		for _, cell := range strings.Split(strings.Trim(l, "| "), "|") {
			if len(strings.TrimSpace(cell)) > cliDocCellMax {
				t.Errorf("docs/cli.md:%d: a table cell of %d characters (at most %d: details go below the table)", i+1, len(strings.TrimSpace(cell)), cliDocCellMax)
			}
		}
	}
	for h := range headings {
		if !slices.Contains(commands, h) {
			t.Errorf("docs/cli.md has a heading \"### strand %s\", which is no command (commands: %v)", h, commands)
		}
	}
}
