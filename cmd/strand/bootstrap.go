package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/metastore/dynamo"
)

// newTokenBootstrap is `strand token bootstrap`: a deployment's first
// admin token, written straight into its DynamoDB metastore with the
// user's AWS credentials (no server call: the API accepts only tokens the
// table holds, so the first one cannot come through it).
func newTokenBootstrap() *cobra.Command {
	var w dynamo.Where
	var prefix, description, out string
	cmd := &cobra.Command{
		Use:   "bootstrap --table TABLE",
		Short: "Issue a deployment's first admin token into its DynamoDB metastore, with your AWS credentials",
		Long: `Issue an admin token straight into a deployed stack's metastore table
(the stack's TableName output), with the AWS credentials of the environment
(AWS_PROFILE, AWS_ACCESS_KEY_ID, SSO, an instance role): they need
dynamodb:DescribeTable and dynamodb:PutItem on the table. No
strand server is called: the API accepts only tokens the table holds, so the
first one is written there. The table must be a strand metastore (keys PK
and SK); anything else is refused before any write.

The secret is printed once, on stdout (or written to --out, mode 0600); the
table keeps only its hash, which is printed on stderr (strand token ls
shows it, strand token revoke takes it). Use the token to create narrower
ones with strand token create.`,
		Example: `  strand token bootstrap --table strand-prod-Table1A2B3C --region eu-west-1 --out strand.token
  export STRAND_TOKEN=$(cat strand.token)
  strand token bootstrap --table strand --aws-endpoint http://localhost:4566   # an emulator's DynamoDB (LocalStack, moto)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if w.Table == "" {
				return errors.New("--table is required: the stack's metastore table (its TableName output)")
			}
			// Refuse an existing --out before anything is written.
			var f *os.File
			if out != "" {
				var err error
				if f, err = os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err != nil {
					return fmt.Errorf("--out: %w (it must not exist: a token is written once)", err)
				}
			}
			secret, err := bootstrap(cmd, w, prefix, description)
			if err != nil {
				if f != nil {
					f.Close()
					os.Remove(out)
				}
				return err
			}
			where := whereSecret(cmd.OutOrStdout())
			if f != nil {
				if _, err := fmt.Fprintln(f, secret); err != nil {
					f.Close()
					return fmt.Errorf("write %s: %w (the token %s is issued: revoke it)", out, err, auth.Hash(secret))
				}
				if err := f.Close(); err != nil {
					return fmt.Errorf("write %s: %w (the token %s is issued: revoke it)", out, err, auth.Hash(secret))
				}
				where = "the secret is in " + out + " (mode 0600)"
			} else {
				fmt.Fprintln(cmd.OutOrStdout(), secret)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "issued admin token %s for prefix %q into table %s; %s\n", auth.Hash(secret), prefix, w.Table, where)
			return nil
		},
	}
	cmd.Flags().StringVar(&w.Table, "table", "", "the deployment's metastore table (the stack's TableName output); required")
	cmd.Flags().StringVar(&w.Region, "region", "", "AWS region of the table (default: AWS_REGION or the profile's)")
	cmd.Flags().StringVar(&w.Endpoint, "aws-endpoint", "", "DynamoDB endpoint URL, for LocalStack or moto (default: AWS)")
	cmd.Flags().StringVar(&prefix, "prefix", "", `stream-name prefix the token covers ("": every stream)`)
	cmd.Flags().StringVar(&description, "description", "first admin token (strand token bootstrap)", "who holds it or what for (at most 256 bytes)")
	cmd.Flags().StringVar(&out, "out", "", "write the secret to this new file (mode 0600) instead of stdout")
	return cmd
}

// bootstrap draws a token and stores its hash with admin on prefix in the
// metastore table w names, once dynamo.Open found it one.
func bootstrap(cmd *cobra.Command, w dynamo.Where, prefix, description string) (string, error) {
	meta, err := dynamo.Open(cmd.Context(), w)
	if err != nil {
		return "", err
	}
	secret, err := auth.NewToken(rand.Reader)
	if err != nil {
		return "", err
	}
	if err := auth.IssueGrant(cmd.Context(), meta, secret, auth.Grant{Prefix: prefix, Ops: []auth.Op{auth.Admin}}, description); err != nil {
		return "", fmt.Errorf("issue into table %s: %w", w.Table, err)
	}
	return secret, nil
}
