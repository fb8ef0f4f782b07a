package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/strandlog/strand/shared/rebalance"
)

func newRebalance(cf *clientFlags) *cobra.Command {
	var stars string
	var apply bool
	cmd := &cobra.Command{
		Use:   "rebalance --stars STAR,STAR,... [--apply]",
		Short: "Spread streams evenly over the stars (operator admin): plan, then --apply",
		Long: `Plan the fewest stream moves after which every star of --stars leads as many
streams as the others, give or take one, and no stream is led by a star not
listed (ADR 0066): for example after adding a star. The plan is computed from
the stream list alone, so the same list gives the same plan. Without --apply
it prints the plan ("move NAME FROM -> TO", one a line); with --apply it runs
each move (strand move) in name order, prints each outcome, goes on past a
refused one (a star without the stream's class, or a stream whose previous
move is not yet settled)
and fails at the end if any was refused. Run it again to finish: a plan
applied is balanced, so a second run plans only what is left.`,
		Example: "  strand rebalance --stars star-0,star-1,star-2\n  strand rebalance --stars star-0,star-1,star-2 --apply",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ids := strings.Split(stars, ",")
			if stars == "" {
				return errors.New("--stars is required: every star that is to lead streams, e.g. star-0,star-1")
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			var streams []rebalance.Stream
			for after := ""; ; {
				page, next, err := c.ListStreams(cmd.Context(), "", after, 1000)
				if err != nil {
					return err
				}
				for _, st := range page {
					streams = append(streams, rebalance.Stream{Name: st.Name, Leader: st.Leader})
				}
				if next == "" {
					break
				}
				after = next
			}
			moves, err := rebalance.Plan(streams, ids)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if len(moves) == 0 {
				fmt.Fprintf(out, "balanced: %d streams over %d stars, nothing to move\n", len(streams), len(ids))
				return nil
			}
			refused := 0
			for _, m := range moves {
				if !apply {
					fmt.Fprintf(out, "move %s %s -> %s\n", m.Name, m.From, m.To)
					continue
				}
				if _, _, err := c.MoveStream(cmd.Context(), m.Name, m.To); err != nil {
					fmt.Fprintf(out, "refused %s %s -> %s: %v\n", m.Name, m.From, m.To, err)
					refused++
					continue
				}
				fmt.Fprintf(out, "moved %s %s -> %s\n", m.Name, m.From, m.To)
			}
			if !apply {
				fmt.Fprintf(out, "%d of %d streams to move; --apply moves them\n", len(moves), len(streams))
				return nil
			}
			if refused > 0 {
				return fmt.Errorf("%d of %d moves refused (see above); run strand rebalance again once their cause is gone", refused, len(moves))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&stars, "stars", "", "every star that is to lead streams, comma-separated")
	cmd.Flags().BoolVar(&apply, "apply", false, "run the moves (without it, print the plan)")
	return cmd
}
