package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/emulator"
	"github.com/strandlog/strand/shared/metastore/dynamo"
)

func TestMain(m *testing.M) { emulator.Main(m) }

// runStrand runs the CLI in process with args and returns its stdout,
// stderr and error.
func runStrand(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// TestTokenBootstrap: strand token bootstrap writes an admin token's hash
// into a metastore table on moto's DynamoDB with the environment's AWS
// credentials and prints the secret once, which the auth checker then
// resolves to admin on every stream; --out writes it to a new 0600 file
// and refuses an existing one; a table that is not a metastore, or none,
// is refused and nothing is written (issue 34: the first token of a
// deployment came from go run ./localstack/token).
func TestTokenBootstrap(t *testing.T) {
	ctx := context.Background()
	endpoint := emulator.DynamoDBEndpoint(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	ddb := dynamodb.NewFromConfig(emulator.ConfigFor(endpoint))
	table := emulator.Name(t, "bootstrap")
	if err := dynamo.CreateTable(ctx, ddb, table); err != nil {
		t.Fatal(err)
	}
	meta := dynamo.New(ddb, table)
	where := []string{"token", "bootstrap", "--table", table, "--region", emulator.Region, "--aws-endpoint", endpoint}

	stdout, stderr, err := runStrand(t, append(where, "--description", "ops team")...)
	if err != nil {
		t.Fatalf("bootstrap: %v\n%s", err, stderr)
	}
	secret := strings.TrimSpace(stdout)
	if !auth.WellFormed(secret) || strings.Count(stdout, "\n") != 1 {
		t.Fatalf("stdout %q is not one token", stdout)
	}
	if !strings.Contains(stderr, auth.Hash(secret)) || strings.Contains(stderr, secret) {
		t.Fatalf("stderr %q: want the hash and never the secret", stderr)
	}
	stored, err := meta.GetToken(ctx, auth.Hash(secret))
	if err != nil {
		t.Fatal(err)
	}
	if stored.Prefix != "" || len(stored.Ops) != 1 || stored.Ops[0] != "admin" || stored.Description != "ops team" || stored.Parent != "" {
		t.Fatalf("stored token %+v, want admin on every stream, a root, described", stored)
	}
	g, err := (&auth.Checker{Meta: meta}).Check(ctx, secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Allow(auth.Admin, "any/stream"); err != nil {
		t.Fatalf("the bootstrapped token is not admin on any/stream: %v", err)
	}

	out := filepath.Join(t.TempDir(), "strand.token")
	stdout, stderr, err = runStrand(t, append(where, "--prefix", "team-a/", "--out", out)...)
	if err != nil {
		t.Fatalf("bootstrap --out: %v\n%s", err, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if stdout != "" || !auth.WellFormed(strings.TrimSpace(string(b))) || fi.Mode().Perm() != 0o600 {
		t.Fatalf("--out: stdout %q, file %q mode %v", stdout, b, fi.Mode().Perm())
	}
	if tok, err := meta.GetToken(ctx, auth.Hash(strings.TrimSpace(string(b)))); err != nil || tok.Prefix != "team-a/" {
		t.Fatalf("--out token stored as %+v, %v", tok, err)
	}
	count := func() int {
		toks, err := meta.ListTokens(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		return len(toks)
	}
	if n := count(); n != 2 {
		t.Fatalf("%d tokens after two bootstraps", n)
	}
	if _, _, err := runStrand(t, append(where, "--out", out)...); err == nil || !strings.Contains(err.Error(), "must not exist") {
		t.Fatalf("bootstrap over an existing --out: %v", err)
	}
	if b2, _ := os.ReadFile(out); !bytes.Equal(b2, b) || count() != 2 {
		t.Fatalf("a refused --out changed the file or the table")
	}

	// Not a metastore: a table keyed by id only. Refused, nothing in it.
	other := emulator.Name(t, "notstrand")
	if _, err := ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(other),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	}); err != nil {
		t.Fatal(err)
	}
	wrongOut := filepath.Join(t.TempDir(), "wrong.token")
	stdout, _, err = runStrand(t, "token", "bootstrap", "--table", other, "--region", emulator.Region, "--aws-endpoint", endpoint, "--out", wrongOut)
	if !errors.Is(err, dynamo.ErrNotMetastore) || stdout != "" {
		t.Fatalf("bootstrap into a table keyed by id: %v (stdout %q), want %v", err, stdout, dynamo.ErrNotMetastore)
	}
	if _, statErr := os.Stat(wrongOut); !errors.Is(statErr, os.ErrNotExist) {
		t.Fatalf("a refused bootstrap left --out behind: %v", statErr)
	}
	scan, err := ddb.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(other)})
	if err != nil {
		t.Fatal(err)
	}
	if scan.Count != 0 {
		t.Fatalf("a refused bootstrap wrote %d items into the other table", scan.Count)
	}
	if _, _, err := runStrand(t, "token", "bootstrap", "--table", emulator.Name(t, "missing"), "--region", emulator.Region, "--aws-endpoint", endpoint); !errors.Is(err, dynamo.ErrNoTable) {
		t.Fatalf("bootstrap into a missing table: %v, want %v", err, dynamo.ErrNoTable)
	}
	if _, _, err := runStrand(t, "token", "bootstrap", "--region", emulator.Region); err == nil || !strings.Contains(err.Error(), "--table is required") {
		t.Fatalf("bootstrap without --table: %v", err)
	}
}
