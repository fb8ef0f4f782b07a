package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/emulator"
	"github.com/strandlog/strand/shared/metastore/dynamo"
)

func TestMain(m *testing.M) { emulator.Main(m) }

// TestIssueReuse: the token lands in the table (hash, prefix, ops) and a
// second run with the same file issues the same token again.
func TestIssueReuse(t *testing.T) {
	ctx := context.Background()
	endpoint := emulator.DynamoDBEndpoint(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	ddb := dynamodb.NewFromConfig(emulator.Config(t), func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) })
	table := emulator.Name(t, "tokens")
	if err := dynamo.CreateTable(ctx, ddb, table); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "token")
	args := []string{"--endpoint", endpoint, "--table", table, "--prefix", "orders/", "--ops", "read,append", "--token-file", file}
	if err := run(args); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(string(b))
	if !auth.WellFormed(tok) {
		t.Fatalf("token file holds %q", tok)
	}
	got, err := dynamo.New(ddb, table).GetToken(ctx, auth.Hash(tok))
	if err != nil {
		t.Fatal(err)
	}
	if got.Prefix != "orders/" || !slices.Equal(got.Ops, []string{"read", "append"}) {
		t.Fatalf("stored grant %+v", got)
	}
	if err := run(args); err != nil {
		t.Fatal(err)
	}
	if b2, _ := os.ReadFile(file); strings.TrimSpace(string(b2)) != tok {
		t.Fatalf("second run drew a new token")
	}
	if err := os.WriteFile(file, []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run(args); err == nil {
		t.Fatal("a malformed token file was accepted")
	}
	if err := run([]string{"--endpoint", endpoint}); err == nil {
		t.Fatal("no --table accepted")
	}
}
