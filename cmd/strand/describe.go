package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strandlog/strand/shared/client"
)

func newDescribe(cf *clientFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "describe NAME",
		Short: "Describe a stream: its configuration, trim point, fence state and tail",
		Long: `Describe a stream: its id, class, leader, creation time, retention and
timestamping (GetStream), then its tail, trim point and whether it is fenced
(CheckTail; the fencing token itself is never shown). Text prints one
"name value" per line under the API's field names; --json prints
{"stream":{...},"tail":{...}}, the API's Stream and CheckTailResponse.`,
		Example: "  strand describe orders\n  strand describe orders --json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			s, err := c.GetStream(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			st, err := c.State(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return describe(cmd.OutOrStdout(), s, st, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"stream":{...},"tail":{...}}`)
	return cmd
}

// describe prints a stream and its state.
func describe(w io.Writer, s client.Stream, st client.State, asJSON bool) error {
	if asJSON {
		var sb, tb strings.Builder
		if err := printRaw(&sb, streamMsg(s)); err != nil {
			return err
		}
		if err := printRaw(&tb, tailMsg(st)); err != nil {
			return err
		}
		_, err := fmt.Fprintf(w, "{\"stream\":%s,\"tail\":%s}\n", strings.TrimSpace(sb.String()), strings.TrimSpace(tb.String()))
		return err
	}
	retention := "forever"
	if s.RetentionMs > 0 {
		retention = (time.Duration(s.RetentionMs) * time.Millisecond).String()
	}
	capped := "capped"
	if s.Uncapped {
		capped = "uncapped"
	}
	rows := []string{"name\t" + s.Name, "id\t" + s.ID, "storageClass\t" + s.Class, "leader\t" + s.Leader,
		"created\t" + time.UnixMilli(s.CreatedMs).UTC().Format(time.RFC3339), "retention\t" + retention,
		"timestamping\t" + s.Timestamping + ", " + capped}
	if s.Deleting {
		rows = append(rows, "deleting\ttrue (its data is being removed)")
	}
	return printFields(w, tailMsg(st), rows...)
}

// version is the build's version: the module version (or "(devel)"),
// the commit when the build recorded one, and the Go toolchain.
func version() string {
	v, commit, dirty := "(devel)", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if commit != "" {
		v += " commit " + commit[:min(12, len(commit))]
		if dirty {
			v += " (modified)"
		}
	}
	return fmt.Sprintf("%s, %s %s/%s", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
