package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/rawjson"
)

type clientFlags struct {
	endpoint  string
	token     string
	tokenFile string
	trust     []string // hosts a leader may be at besides the endpoint's
	retryFor  time.Duration
	sets      []*pflag.FlagSet // where register bound the flags
}

// bearer is the token to send: --token, else the contents of
// --token-file, else STRAND_TOKEN.
func (f *clientFlags) bearer() (string, error) {
	tok, from := os.Getenv("STRAND_TOKEN"), "STRAND_TOKEN"
	switch {
	case f.token != "":
		tok, from = f.token, "--token"
	case f.tokenFile != "":
		var err error
		if tok, err = readTokenFile(f.tokenFile); err != nil {
			return "", err
		}
		from = "--token-file " + f.tokenFile
	}
	if tok != "" && !auth.WellFormed(tok) {
		return "", malformedToken(from, tok)
	}
	return tok, nil
}

// malformedToken says why the token from a source is not one, without
// printing it.
func malformedToken(from, tok string) error {
	why := fmt.Sprintf("it is %d characters", len(tok))
	if n := strings.Count(tok, "\n") + 1; n > 1 {
		why = fmt.Sprintf("it has %d lines", n)
	} else if !strings.HasPrefix(tok, auth.TokenPrefix) {
		why = "it does not start with " + auth.TokenPrefix
	}
	return fmt.Errorf("the token from %s is malformed: %s; a token is %s followed by 52 base32 characters, on one line", from, why, auth.TokenPrefix)
}

// readTokenFile reads a token from a file (surrounding space trimmed).
func readTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("--token-file %s is empty", path)
	}
	return tok, nil
}

func (f *clientFlags) client() (*client.Client, error) {
	tok, err := f.bearer()
	if err != nil {
		return nil, err
	}
	opts := []client.Option{client.WithToken(tok), client.WithTrustedLeaders(f.trust...)}
	// Without --retry-for the client's default budget (the flag's default)
	// applies, which fails at once against a server never reached (a
	// stopped strand dev, a wrong --endpoint); --retry-for given also
	// waits that long for a server that is still starting.
	if f.retrySet() {
		r := client.DefaultRetry
		r.MaxElapsed = f.retryFor
		if f.retryFor <= 0 {
			r.MaxAttempts = 1
		}
		opts = append(opts, client.WithRetry(r))
	}
	return client.New(f.endpoint, opts...)
}

// retrySet reports whether --retry-for was given.
func (f *clientFlags) retrySet() bool {
	for _, fs := range f.sets {
		if fl := fs.Lookup("retry-for"); fl != nil && fl.Changed {
			return true
		}
	}
	return false
}

func newCreate(cf *clientFlags) *cobra.Command {
	var class, stamping string
	var retention time.Duration
	var uncapped bool
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a stream",
		Long: `Create a stream. Its class (standard or express) is fixed for life; its
retention (0: forever) bounds how long settled data is kept.

--timestamping says where records' timestamps come from: client-prefer (the
record's timestamp when it has one, else the arrival time; the default),
client-require (every record must have one) or arrival (the arrival time,
always). A client timestamp later than the arrival time becomes the arrival
time unless --uncapped (which keeps one up to 24 h ahead and refuses a later
one). A stream's timestamps never decrease.`,
		Example: "  strand create orders\n  strand create clicks --class express --retention 72h\n  strand create sensor --timestamping client-require",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			s, err := c.CreateStream(cmd.Context(), args[0], client.CreateOptions{Class: class, RetentionMs: retention.Milliseconds(),
				Timestamping: stamping, Uncapped: uncapped})
			if err != nil {
				return err
			}
			capped := "capped"
			if s.Uncapped {
				capped = "uncapped"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created %s (%s, id %s, leader %s, timestamps %s, %s)\n", s.Name, s.Class, s.ID, s.Leader, s.Timestamping, capped)
			return nil
		},
	}
	cmd.Flags().StringVar(&class, "class", "standard", "storage class: standard or express")
	cmd.Flags().DurationVar(&retention, "retention", 0, "keep settled data this long (e.g. 72h; 0 keeps forever)")
	cmd.Flags().StringVar(&stamping, "timestamping", "client-prefer", "where timestamps come from: client-prefer, client-require or arrival")
	cmd.Flags().BoolVar(&uncapped, "uncapped", false, "keep client timestamps later than the arrival time, up to 24 h ahead (default: capped to it)")
	return cmd
}

func newLs(cf *clientFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "ls [PREFIX]",
		Short:   "List streams (optionally those whose names start with PREFIX)",
		Example: "  strand ls\n  strand ls logs/",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			prefix := ""
			if len(args) == 1 {
				prefix = args[0]
			}
			out := cmd.OutOrStdout()
			after := ""
			for {
				page, next, err := c.ListStreams(cmd.Context(), prefix, after, 1000)
				if err != nil {
					return err
				}
				for _, s := range page {
					if asJSON {
						if err := printRaw(out, streamMsg(s)); err != nil {
							return err
						}
						continue
					}
					state := ""
					if s.Deleting {
						state = " (deleting)"
					}
					fmt.Fprintf(out, "%s\t%s\t%s%s\n", s.Name, s.Class, s.Leader, state)
				}
				if next == "" {
					return nil
				}
				after = next
			}
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per stream")
	return cmd
}

func newRm(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Delete a stream (its data is removed in the background)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			if err := c.DeleteStream(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted %s\n", args[0])
			return nil
		},
	}
}

func newCheckTail(cf *clientFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check-tail NAME",
		Short: "Print a stream's tail: the next seq and the last record's timestamp",
		Long: `Print a stream's tail: nextSeqNum (the seq the next record gets),
lastTimestampMs (the last record's timestamp, 0: none), trimSeqNum (the trim
point) and fenced, one "name value" per line, or with --json the API's
CheckTailResponse with the same field names.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			st, err := c.State(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			m := tailMsg(st)
			if asJSON {
				return printRaw(cmd.OutOrStdout(), m)
			}
			return printFields(cmd.OutOrStdout(), m)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// tailMsg is st as the API's CheckTailResponse.
func tailMsg(st client.State) *strandv1.CheckTailResponse {
	return &strandv1.CheckTailResponse{NextSeqNum: st.NextSeq, LastTimestampMs: st.LastTsMs, TrimSeqNum: st.TrimSeq, Fenced: st.Fenced}
}

// printFields prints rows ("name\tvalue" lines) and then m's fields as
// "name value" lines, aligned, with the names its JSON has (the text and
// the --json output name a field alike).
func printFields(w io.Writer, m proto.Message, rows ...string) error {
	b, err := rawjson.Marshal(m)
	if err != nil {
		return err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, r)
	}
	fds := m.ProtoReflect().Descriptor().Fields()
	for i := range fds.Len() {
		name := fds.Get(i).JSONName()
		v, ok := fields[name]
		if !ok {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\n", name, strings.Trim(string(v), `"`))
	}
	return tw.Flush()
}

// printRaw prints m as one line of raw JSON (shared/rawjson): the CLI's
// --json and --format json output is the API's Strand-Format: raw.
func printRaw(w io.Writer, m proto.Message) error {
	b, err := rawjson.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// streamMsg is s as the API's Stream message.
func streamMsg(s client.Stream) *strandv1.Stream {
	m := &strandv1.Stream{Name: s.Name, Id: s.ID, Leader: s.Leader, CreatedMs: s.CreatedMs, RetentionMs: s.RetentionMs, Deleting: s.Deleting,
		Timestamping: &strandv1.Timestamping{Mode: timestampingMode(s.Timestamping), Uncapped: s.Uncapped}}
	switch s.Class {
	case "standard":
		m.StorageClass = strandv1.StorageClass_STORAGE_CLASS_STANDARD
	case "express":
		m.StorageClass = strandv1.StorageClass_STORAGE_CLASS_EXPRESS
	}
	return m
}

// timestampingMode is the API's mode of a client.Stream's Timestamping
// ("client-prefer" is TIMESTAMPING_MODE_CLIENT_PREFER).
func timestampingMode(name string) strandv1.TimestampingMode {
	return strandv1.TimestampingMode(strandv1.TimestampingMode_value["TIMESTAMPING_MODE_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))])
}
