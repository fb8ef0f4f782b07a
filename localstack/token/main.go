// Command token issues a strand bearer token into the metastore table on an
// AWS endpoint (LocalStack, moto) and prints it: the star's API accepts only
// tokens the metastore holds. localstack/deploy.sh runs it.
//
//	go run ./localstack/token --endpoint http://localhost:4566 --table strand --token-file localstack/.run/token
//
// With --endpoint "" it writes to DynamoDB on AWS (the SDK's credentials and
// the given region); an operator issues a deployed stack's first token
// with `strand token bootstrap` (docs/deploy.md), which reaches the table
// the same way (dynamo.Open, auth.Issue). With --token-file, a token already in the file is issued again (the same
// grant; re-running is harmless) and a new one is written there (mode 0600).
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/metastore/dynamo"
)

func main() {
	if err := run(os.Args[1:]); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "token:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fl := flag.NewFlagSet("token", flag.ContinueOnError)
	endpoint := fl.String("endpoint", "http://localhost:4566", "AWS endpoint (DynamoDB); \"\" for AWS itself")
	region := fl.String("region", "us-east-1", "AWS region")
	table := fl.String("table", "", "metastore table (required)")
	prefix := fl.String("prefix", "", "stream-name prefix the token covers (\"\": every stream)")
	ops := fl.String("ops", "admin", "operations: read, append, trim, fence and/or admin, comma-separated")
	file := fl.String("token-file", "", "reuse the token in this file, or write a new one there")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *table == "" {
		return errors.New("--table is required")
	}
	grant, err := auth.ParseOps(*ops)
	if err != nil {
		return err
	}
	tok, err := load(*file)
	if err != nil {
		return err
	}
	ctx := context.Background()
	meta, err := dynamo.Open(ctx, dynamo.Where{Table: *table, Region: *region, Endpoint: *endpoint})
	if err != nil {
		return err
	}
	if err := auth.Issue(ctx, meta, tok, *prefix, grant); err != nil {
		return fmt.Errorf("issue into table %s at %s: %w", *table, *endpoint, err)
	}
	if *file != "" {
		if err := os.WriteFile(*file, []byte(tok+"\n"), 0o600); err != nil {
			return fmt.Errorf("write %s: %w", *file, err)
		}
	}
	fmt.Println(tok)
	return nil
}

// load returns the token in path, or a new one when path is "" or missing.
func load(path string) (string, error) {
	if path != "" {
		b, err := os.ReadFile(path)
		switch {
		case err == nil:
			tok := strings.TrimSpace(string(b))
			if !auth.WellFormed(tok) {
				return "", fmt.Errorf("%s does not hold a token (%s...); delete it to draw a new one", path, auth.TokenPrefix)
			}
			return tok, nil
		case !errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("read %s: %w", path, err)
		}
	}
	return auth.NewToken(rand.Reader)
}
