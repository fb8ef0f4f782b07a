package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/strandlog/strand/shared/client"
)

func newFence(cf *clientFlags) *cobra.Command {
	var current string
	cmd := &cobra.Command{
		Use:   "fence NAME TOKEN",
		Short: "Fence a stream to a token: appends must then carry it (--fence-token)",
		Long: `Fence a stream to TOKEN (at most 36 bytes; "" unfences it). The fence is a
command record sequenced with the appends: every append after it must carry
TOKEN (strand append --fence-token, the API's fencing_token) or is refused
with failed_precondition, so a deposed writer can never append after the
fence, across restarts and takeovers. With --current the fence is refused
unless the stream's current token is that one.`,
		Example: "  strand fence orders writer-2\n  strand fence orders writer-3 --current writer-2\n  strand fence orders '' --current writer-3   # unfence",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var opt client.FenceOptions
			if cmd.Flags().Changed("current") {
				opt.CurrentToken = &current
			}
			seq, err := c.Fence(cmd.Context(), args[0], args[1], opt)
			if err != nil {
				return err
			}
			if args[1] == "" {
				fmt.Fprintf(cmd.OutOrStdout(), "unfenced %s (command record at seq %d)\n", args[0], seq)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "fenced %s (command record at seq %d): appends must carry --fence-token %s\n", args[0], seq, args[1])
			return nil
		},
	}
	cmd.Flags().StringVar(&current, "current", "", `refuse unless this is the stream's current token ("" for not fenced)`)
	return cmd
}

func newTrim(cf *clientFlags) *cobra.Command {
	var token string
	cmd := &cobra.Command{
		Use:   "trim NAME SEQ",
		Short: "Trim a stream below a seq: reads start at SEQ at once, storage is freed later",
		Long: `Trim a stream below SEQ: a command record sequenced with the appends. Once
it returns, no read returns a record below the trim point: a read or tail that
starts below it starts at it. The records are removed from storage later, by
the background trim. A SEQ past the stream's tail trims up to the trim record
itself; the trim point never moves backward. A fenced stream's trim must carry
its token (--fence-token).`,
		Example: "  strand trim orders 1000",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			seq, err := strconv.ParseUint(args[1], 10, 64)
			if err != nil {
				return fmt.Errorf("SEQ %q: want a seq number (0 to %d)", args[1], uint64(1<<64-1))
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			t, err := c.Trim(cmd.Context(), args[0], seq, client.TrimOptions{FenceToken: token})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "trimmed %s below seq %d (command record at seq %d)\n", args[0], t.TrimSeq, t.Seq)
			return nil
		},
	}
	cmd.Flags().StringVar(&token, "fence-token", "", "the stream's fencing token, if it is fenced")
	return cmd
}

// isCommand reports a command record: exactly one header, with an empty
// name (format.CommandOf).
func isCommand(r client.Record) bool {
	return len(r.Headers) == 1 && len(r.Headers[0].Name) == 0
}

func newConfig(cf *clientFlags) *cobra.Command {
	var stamping string
	var retention time.Duration
	var uncapped bool
	cmd := &cobra.Command{
		Use:   "config NAME [--retention D] [--timestamping MODE] [--uncapped[=false]]",
		Short: "Change a stream's retention and timestamping",
		Long: `Change a stream's retention and timestamping after creation (admin). The
change is a command record sequenced with the appends: every record before it
was judged by the old configuration, every record after it by the new one
(timestamping applies from the record after the printed seq; retention from
the next background trim). Flags not given keep their value; --uncapped=false
caps client timestamps again.`,
		Example: "  strand config orders --retention 168h\n  strand config sensors --timestamping arrival\n  strand config sensors --uncapped=false",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var opt client.ReconfigureOptions
			fl := cmd.Flags()
			if fl.Changed("retention") {
				ms := retention.Milliseconds()
				opt.RetentionMs = &ms
			}
			if fl.Changed("timestamping") {
				opt.Timestamping = stamping
			}
			if fl.Changed("uncapped") {
				opt.Uncapped = &uncapped
			}
			if opt == (client.ReconfigureOptions{}) {
				return fmt.Errorf("nothing to change: give --retention, --timestamping or --uncapped")
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			s, seq, err := c.ReconfigureStream(cmd.Context(), args[0], opt)
			if err != nil {
				return err
			}
			capped := "capped"
			if s.Uncapped {
				capped = "uncapped"
			}
			ret := "forever"
			if s.RetentionMs > 0 {
				ret = (time.Duration(s.RetentionMs) * time.Millisecond).String()
			}
			fmt.Fprintf(cmd.OutOrStdout(), "configured %s (command record at seq %d; the records after it use it): retention %s, timestamps %s, %s\n", s.Name, seq, ret, s.Timestamping, capped)
			return nil
		},
	}
	cmd.Flags().DurationVar(&retention, "retention", 0, "keep settled data this long (e.g. 72h; 0 keeps forever)")
	cmd.Flags().StringVar(&stamping, "timestamping", "", "where timestamps come from: client-prefer, client-require or arrival")
	cmd.Flags().BoolVar(&uncapped, "uncapped", false, "keep client timestamps later than the arrival time (=false: cap them)")
	return cmd
}
