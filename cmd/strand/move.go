package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

func newMove(cf *clientFlags) *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "move NAME --to STAR",
		Short: "Move a stream's leadership to another star (operator admin)",
		Long: `Move a stream's leadership to star STAR (ADR 0065). The stream's leader seals
it (a command record: it takes a seq), waits until the seal and everything
before it are absorbed, and records STAR as the leader; STAR opens the stream
on its first call with the same tail, producers and command state. Appends
pause for the move (clients retry at the new leader) and nothing acknowledged
is lost or duplicated; readers and tails resume at the new leader. Needs an
admin token over every stream. A fenced stream moves with its fencing token.
Refused: an unknown star, a star without the stream's class, and the
stream's own leader. A
move interrupted after its seal is finished by running the same command
again, or by the old star's successor on its own.`,
		Example: "  strand move orders --to star-1",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if to == "" {
				return errors.New("--to STAR is required: the star that is to lead the stream")
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			st, seal, err := c.MoveStream(cmd.Context(), args[0], to)
			if err != nil {
				return err
			}
			if seal == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "moved %s to %s (finished a move sealed earlier)\n", args[0], st.Leader)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "moved %s to %s (seal at seq %d)\n", args[0], st.Leader, seal)
			return nil
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the star to lead the stream (its id, e.g. star-1)")
	return cmd
}
