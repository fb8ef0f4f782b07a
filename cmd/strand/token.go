package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/client"
)

func newToken(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke scoped bearer tokens (needs an admin token)",
		Long: `Manage bearer tokens. A token is scoped to a stream-name prefix ("" = every
stream) and to operations: read, append, trim, fence and/or admin (admin
implies the others, and lets the token manage tokens; trim and fence are apart
from append, since either undoes other writers' work). An admin token manages only tokens
whose prefix starts with its own, with operations it holds.

The server stores only a token's SHA-256 hash: the secret is printed once, by
create, and the hash is the token's id for ls and revoke. A revoked token stops
working at once on the server that revoked it, and on every server within 10 s.`,
		Example: `  strand token create --prefix team-a/ --ops read,append --description "team a producers"
  strand token ls
  strand token revoke 3f2a...e9 (the hash from create or ls)`,
	}
	cmd.AddCommand(newTokenCreate(cf), newTokenLs(cf), newTokenRevoke(cf))
	return cmd
}

func newTokenCreate(cf *clientFlags) *cobra.Command {
	var prefix, ops, description, expires string
	var asJSON, tenant bool
	var maxStreams, appendRate int64
	cmd := &cobra.Command{
		Use:   "create --prefix PREFIX --ops OPS",
		Short: "Create a token scoped to a stream-name prefix and operations; prints its secret once",
		Long: `Create a token for streams whose names start with --prefix, allowed --ops
(comma-separated: read, append, trim, fence, admin). The prefix must start with the calling
token's prefix. The secret is printed once on stdout (keep it: it cannot be
shown again); its hash, printed on stderr, is what ls shows and revoke takes.
--tenant makes the token start a tenant of its own, with quotas --max-streams
and --append-bytes-per-sec (0: the star's); only an admin token for every
stream outside any started tenant (an operator's) may.`,
		Example: `  strand token create --prefix team-a/ --ops admin
  strand token create --prefix team-a/logs/ --ops read --description dashboards
  STRAND_TOKEN=$(strand token create --prefix ci/ --ops append)
  strand token create --prefix team-b/ --ops admin --tenant --max-streams 100`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("prefix") {
				return errors.New(`--prefix is required: the stream-name prefix the token is scoped to (--prefix "" for every stream)`)
			}
			if strings.TrimSpace(ops) == "" {
				return errors.New("--ops is required: a comma-separated list of read, append, trim, fence, admin (e.g. --ops read,append)")
			}
			expiresMs, err := parseExpiry(expires, time.Now())
			if err != nil {
				return err
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			secret, info, err := c.CreateToken(cmd.Context(), client.TokenSpec{Prefix: prefix, Ops: strings.Split(ops, ","), Description: description, ExpiresMs: expiresMs,
				Tenant: tenant, MaxStreams: maxStreams, AppendBytesPerSec: appendRate})
			if err != nil {
				return err
			}
			if w := auth.PrefixWarning(info.Prefix); w != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			if asJSON {
				b, _ := json.Marshal(struct {
					Token string `json:"token"`
					client.TokenInfo
				}{secret, info})
				fmt.Fprintln(cmd.OutOrStdout(), string(b))
				return nil
			}
			fmt.Fprintln(cmd.OutOrStdout(), secret)
			exp := ""
			if info.ExpiresMs != 0 {
				exp = ", expiring at " + msTime(info.ExpiresMs)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "created token %s for prefix %q with %s%s%s; %s\n",
				info.Hash, info.Prefix, strings.Join(info.Ops, ","), exp, strings.ReplaceAll(tenantOf(info), "\t", ", "), whereSecret(cmd.OutOrStdout()))
			return nil
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", `stream-name prefix the token is scoped to ("" = every stream); required`)
	cmd.Flags().StringVar(&ops, "ops", "", "comma-separated operations: read, append, trim, fence, admin; required")
	cmd.Flags().StringVar(&description, "description", "", "who holds it or what for (at most 256 bytes)")
	cmd.Flags().StringVar(&expires, "expires", "", "the token is refused from then on: a duration from now (24h, 90m) or a time (RFC 3339); default never")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object: token (the secret), hash, prefix, ops, description, expiresMs")
	cmd.Flags().BoolVar(&tenant, "tenant", false, "the token starts a tenant of its own (per-tenant limits and quotas apart from the caller's)")
	cmd.Flags().Int64Var(&maxStreams, "max-streams", 0, "with --tenant: the tenant's stream quota (0: the star's --max-streams-per-tenant)")
	cmd.Flags().Int64Var(&appendRate, "append-bytes-per-sec", 0, "with --tenant: the tenant's append byte rate per star (0: the star's --append-bytes-per-sec-per-tenant)")
	return cmd
}

func newTokenLs(cf *clientFlags) *cobra.Command {
	var prefix string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List tokens (hash, prefix, ops, description) within the calling token's prefix; never secrets",
		Example: `  strand token ls
  strand token ls --prefix team-a/ --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			ts, err := c.ListTokens(cmd.Context(), prefix)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, t := range ts {
				if asJSON {
					b, _ := json.Marshal(t)
					fmt.Fprintln(out, string(b))
					continue
				}
				fmt.Fprintf(out, "%s\t%q\t%s\t%s%s%s\n", t.Hash, t.Prefix, strings.Join(t.Ops, ","), t.Description, expiry(t.ExpiresMs), tenantOf(t))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "only tokens whose prefix starts with this")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per token")
	return cmd
}

func newTokenRevoke(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke HASH",
		Short: "Revoke a token by its hash (from create or ls); it stops working within 10 s",
		Long: `Revoke the token whose hash is HASH (64 hex digits, as token create and token
ls print; not the secret). The token's prefix must start with the calling
token's prefix. It is refused at once by the server that revoked it, and by
every server within 10 s (their grant caches).`,
		Example: "  strand token revoke $(strand token ls --prefix ci/ | cut -f1 | head -1)",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New("give the HASH of the token to revoke (64 hex digits; strand token ls lists them)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			err = c.RevokeToken(cmd.Context(), strings.TrimSpace(args[0]))
			if revokedAlready(err) {
				// The wanted state holds: not a failure (a script that
				// revokes twice goes on).
				var ce *connect.Error
				errors.As(err, &ce)
				fmt.Fprintln(cmd.OutOrStdout(), layerNames.ReplaceAllString(ce.Message(), "$1"))
				return nil
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked %s (servers that cached it refuse it within 10 s)\n", args[0])
			return nil
		},
	}
}

// parseExpiry reads --expires: "" (never: 0), a positive duration from
// now, or an RFC 3339 time; the result is Unix ms.
func parseExpiry(s string, now time.Time) (int64, error) {
	if s == "" {
		return 0, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return 0, fmt.Errorf("--expires %q: want a positive duration", s)
		}
		return now.Add(d).UnixMilli(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return 0, fmt.Errorf("--expires %q: want a duration from now (24h, 90m) or a time (RFC 3339: 2027-01-02T15:04:05Z)", s)
	}
	return t.UnixMilli(), nil
}

// expiry describes an expiry for people ("" for none).
func expiry(ms int64) string {
	if ms == 0 {
		return ""
	}
	return "\texpires " + msTime(ms)
}

// tenantOf says, for a token that starts a tenant, so and its quotas.
func tenantOf(t client.TokenInfo) string {
	if !t.Tenant {
		return ""
	}
	q := func(n int64, unit string) string {
		if n == 0 {
			return "the star's " + unit
		}
		return fmt.Sprintf("%d %s", n, unit)
	}
	return "\tstarts a tenant (" + q(t.MaxStreams, "streams") + ", " + q(t.AppendBytesPerSec, "bytes/s") + ")"
}

func msTime(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }

// whereSecret says where the new token's secret went: "above" only when
// stdout is the terminal stderr shows next to.
func whereSecret(out io.Writer) string {
	if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return "the secret above is shown only once"
	}
	return "the secret went to stdout and is shown only once: keep it"
}

// revokedAlready reports whether a revoke failed only because the token
// was revoked before (not_found "... was revoked already, at T").
func revokedAlready(err error) bool {
	return connect.CodeOf(err) == connect.CodeNotFound && strings.Contains(err.Error(), "was revoked already, at")
}
