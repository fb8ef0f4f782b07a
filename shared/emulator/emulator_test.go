package emulator_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/strandlog/strand/shared/emulator"
)

func TestMain(m *testing.M) { emulator.Main(m) }

const writers = 48

func s3Client(t *testing.T) *s3.Client {
	return s3.NewFromConfig(emulator.Config(t), func(o *s3.Options) { o.UsePathStyle = true })
}

func ddbClient(t *testing.T) *dynamodb.Client {
	return dynamodb.NewFromConfig(emulator.ConfigFor(emulator.DynamoDBEndpoint(t)))
}

// race runs f(i) for i in [0, writers) as close to simultaneously as it can
// and returns the errors.
func race(f func(i int) error) []error {
	errs := make([]error, writers)
	var start, wg sync.WaitGroup
	start.Add(1)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start.Wait()
			errs[i] = f(i)
		}()
	}
	start.Done()
	wg.Wait()
	return errs
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func TestEndpointAnswersHTTP(t *testing.T) {
	ep := emulator.Endpoint(t)
	if ep == "" {
		t.Fatal("empty endpoint")
	}
	resp, err := http.Get(ep + "/")
	if err != nil {
		t.Fatalf("GET %s: %v", ep, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if emulator.Endpoint(t) != ep {
		t.Fatal("Endpoint changed between calls; want one shared server per binary")
	}
}

func TestNameIsUniqueAndValid(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$`)
	seen := map[string]bool{}
	for _, p := range []string{"", "S3Obj Test_Bucket", "a-very-long-prefix-that-goes-on-and-on-and-on-forever-more"} {
		for range 50 {
			n := emulator.Name(t, p)
			if !valid.MatchString(n) {
				t.Fatalf("Name(%q) = %q: not a valid bucket/table name", p, n)
			}
			if seen[n] {
				t.Fatalf("Name(%q) repeated %q", p, n)
			}
			seen[n] = true
		}
	}
}

// TestS3PutIfNoneMatchIsAtomic: of 48 concurrent If-None-Match: * PUTs of one
// new key, exactly one succeeds, the others get 412 PreconditionFailed, and
// the stored body is the winner's.
func TestS3PutIfNoneMatchIsAtomic(t *testing.T) {
	ctx := context.Background()
	c := s3Client(t)
	bucket := emulator.Name(t, "atomic")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	for round := range 3 {
		key := fmt.Sprintf("chains/star-0/1/%d", round)
		errs := race(func(i int) error {
			_, err := c.PutObject(ctx, &s3.PutObjectInput{
				Bucket:      aws.String(bucket),
				Key:         aws.String(key),
				Body:        bytes.NewReader([]byte("writer-" + strconv.Itoa(i))),
				IfNoneMatch: aws.String("*"),
			}, func(o *s3.Options) { o.RetryMaxAttempts = 1 })
			return err
		})
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: writers %d and %d both created %s: conditional PUT is not atomic", round, winner, i, key)
				}
				winner = i
			case apiCode(err) == "PreconditionFailed":
			default:
				t.Fatalf("round %d: writer %d: unexpected error %v", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer created %s", round, key)
		}
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		body, _ := io.ReadAll(out.Body)
		out.Body.Close()
		if want := "writer-" + strconv.Itoa(winner); string(body) != want {
			t.Fatalf("round %d: stored body %q, want the winner's %q", round, body, want)
		}
	}
}

func createTable(t *testing.T, c *dynamodb.Client) string {
	t.Helper()
	ctx := context.Background()
	table := emulator.Name(t, "atomic")
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			{AttributeName: aws.String("PK"), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String("SK"), AttributeType: ddbtypes.ScalarAttributeTypeS},
		},
		KeySchema: []ddbtypes.KeySchemaElement{
			{AttributeName: aws.String("PK"), KeyType: ddbtypes.KeyTypeHash},
			{AttributeName: aws.String("SK"), KeyType: ddbtypes.KeyTypeRange},
		},
	})
	if err != nil {
		t.Fatalf("create table: %v", err)
	}
	w := dynamodb.NewTableExistsWaiter(c, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond })
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, 30*time.Second); err != nil {
		t.Fatalf("wait table: %v", err)
	}
	return table
}

func s(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
func n(v int) ddbtypes.AttributeValue    { return &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(v)} }

// TestDynamoConditionExpressionIsAtomic: of 48 concurrent create-if-absent
// PutItems of one key, exactly one succeeds; then of 48 concurrent CAS
// updates from the same version, exactly one succeeds.
func TestDynamoConditionExpressionIsAtomic(t *testing.T) {
	ctx := context.Background()
	c := ddbClient(t)
	table := createTable(t, c)
	key := map[string]ddbtypes.AttributeValue{"PK": s("STREAM#a"), "SK": s("META")}

	errs := race(func(i int) error {
		_, err := c.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:           aws.String(table),
			Item:                map[string]ddbtypes.AttributeValue{"PK": s("STREAM#a"), "SK": s("META"), "v": n(0), "w": n(i)},
			ConditionExpression: aws.String("attribute_not_exists(PK)"),
		}, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
		return err
	})
	checkOneWinner(t, "create-if-absent", errs, "ConditionalCheckFailedException")

	errs = race(func(i int) error {
		_, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(table),
			Key:                       key,
			UpdateExpression:          aws.String("SET v = :to, w = :w"),
			ConditionExpression:       aws.String("v = :from"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":from": n(0), ":to": n(1), ":w": n(i)},
		}, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
		return err
	})
	checkOneWinner(t, "compare-and-set", errs, "ConditionalCheckFailedException")
}

// TestDynamoTransactWriteItemsIsAtomic: a transaction whose condition fails
// writes none of its items, and of 48 concurrent transactions that each move
// a head from epoch 1 to 2 and create EPOCH#2, exactly one succeeds.
func TestDynamoTransactWriteItemsIsAtomic(t *testing.T) {
	ctx := context.Background()
	c := ddbClient(t)
	table := createTable(t, c)
	head := map[string]ddbtypes.AttributeValue{"PK": s("CHAIN#s#1"), "SK": s("HEAD")}
	if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(table),
		Item:      map[string]ddbtypes.AttributeValue{"PK": s("CHAIN#s#1"), "SK": s("HEAD"), "epoch": n(1)},
	}); err != nil {
		t.Fatalf("put head: %v", err)
	}
	mint := func(from, to, writer int) *dynamodb.TransactWriteItemsInput {
		return &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
			{Update: &ddbtypes.Update{
				TableName:                 aws.String(table),
				Key:                       head,
				UpdateExpression:          aws.String("SET epoch = :to"),
				ConditionExpression:       aws.String("epoch = :from"),
				ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":from": n(from), ":to": n(to)},
			}},
			{Put: &ddbtypes.Put{
				TableName:           aws.String(table),
				Item:                map[string]ddbtypes.AttributeValue{"PK": s("CHAIN#s#1"), "SK": s(fmt.Sprintf("EPOCH#%d", to)), "w": n(writer)},
				ConditionExpression: aws.String("attribute_not_exists(PK)"),
			}},
		}}
	}

	// A failing condition on the head must not let the Put land.
	_, err := c.TransactWriteItems(ctx, mint(7, 9, -1))
	var tce *ddbtypes.TransactionCanceledException
	if !errors.As(err, &tce) {
		t.Fatalf("mismatched transaction: got %v, want TransactionCanceledException", err)
	}
	if len(tce.CancellationReasons) != 2 || aws.ToString(tce.CancellationReasons[0].Code) != "ConditionalCheckFailed" {
		t.Fatalf("cancellation reasons: %+v", tce.CancellationReasons)
	}
	got, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table),
		Key: map[string]ddbtypes.AttributeValue{"PK": s("CHAIN#s#1"), "SK": s("EPOCH#9")}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.Item != nil {
		t.Fatalf("cancelled transaction wrote EPOCH#9: %v", got.Item)
	}

	errs := race(func(i int) error {
		_, err := c.TransactWriteItems(ctx, mint(1, 2, i), func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
		return err
	})
	winner := checkOneWinner(t, "transact mint", errs, "TransactionCanceledException")
	got, err = c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table),
		Key: map[string]ddbtypes.AttributeValue{"PK": s("CHAIN#s#1"), "SK": s("EPOCH#2")}, ConsistentRead: aws.Bool(true)})
	if err != nil || got.Item == nil {
		t.Fatalf("EPOCH#2 missing after mint: %v", err)
	}
	if w := got.Item["w"].(*ddbtypes.AttributeValueMemberN).Value; w != strconv.Itoa(winner) {
		t.Fatalf("EPOCH#2 written by %s, want the winner %d", w, winner)
	}
}

func checkOneWinner(t *testing.T, what string, errs []error, loserCode string) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("%s: writers %d and %d both succeeded: not atomic", what, winner, i)
			}
			winner = i
		case apiCode(err) == loserCode:
		default:
			t.Fatalf("%s: writer %d: unexpected error %v", what, i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("%s: no writer succeeded", what)
	}
	return winner
}

// TestDynamoDBEndpoint: STRAND_AWS_ENDPOINT_DYNAMODB wins for DynamoDB (moto
// beside LocalStack's core), otherwise DynamoDB shares Endpoint.
func TestDynamoDBEndpoint(t *testing.T) {
	t.Setenv(emulator.EnvEndpoint, "http://127.0.0.1:4566/")
	t.Setenv(emulator.EnvDynamoDBEndpoint, "")
	if got := emulator.DynamoDBEndpoint(t); got != "http://127.0.0.1:4566" {
		t.Fatalf("without %s: %q, want the shared endpoint", emulator.EnvDynamoDBEndpoint, got)
	}
	t.Setenv(emulator.EnvDynamoDBEndpoint, "http://127.0.0.1:41234/")
	if got := emulator.DynamoDBEndpoint(t); got != "http://127.0.0.1:41234" {
		t.Fatalf("with %s: %q, want its value", emulator.EnvDynamoDBEndpoint, got)
	}
	if got := emulator.Endpoint(t); got != "http://127.0.0.1:4566" {
		t.Fatalf("Endpoint moved with the DynamoDB override: %q", got)
	}
}
