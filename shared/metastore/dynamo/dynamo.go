package dynamo

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/strandlog/strand/shared/metastore"
)

// TxAttempts bounds the attempts of one transaction cancelled for a reason
// that says nothing was written and a retry may succeed (TransactionConflict,
// throttling); after the last it returns metastore.ErrUnavailable.
const TxAttempts = 5

// TxBackoff is the wait after the first such cancellation; it doubles.
const TxBackoff = 20 * time.Millisecond

// DynamoDB's key size limits, in bytes.
const (
	maxPKBytes = 2048
	maxSKBytes = 1024
)

// Store is a metastore.Store in one DynamoDB table.
type Store struct {
	client *dynamodb.Client
	table  string
	sleep  func(ctx context.Context, d time.Duration) error
	// rand draws the write ids of conditional transactions (markWrite).
	rand io.Reader
	// layouts holds the chains whose head this store has seen in layout
	// 2 (metastore.ChainID -> struct{}): a head's layout only ever moves
	// from 1 to 2, so the writes to it name layout 2's attributes at
	// once. A chain not in it is tried in layout 1; a write whose
	// condition fails on a head of the other layout learns it and is
	// sent again (headLayout, sawLayout).
	layouts sync.Map
}

// headLayout is the layout the head of chain c is believed to have.
func (st *Store) headLayout(c metastore.ChainID) uint8 {
	if _, ok := st.layouts.Load(c); ok {
		return 2
	}
	return 1
}

// sawLayout records the layout a head of chain c was read in.
func (st *Store) sawLayout(c metastore.ChainID, layout uint8) {
	if layout == 2 {
		st.layouts.Store(c, struct{}{})
	} else {
		st.layouts.Delete(c)
	}
}

var _ metastore.Store = (*Store)(nil)

// New returns the store in table, reached through client. It makes no
// request; CreateTable creates the table for development and emulators.
func New(client *dynamodb.Client, table string) *Store {
	return &Store{client: client, table: table, sleep: sleepCtx, rand: rand.Reader}
}

// Table returns the table's name.
func (st *Store) Table() string { return st.table }

// CreateTable creates table with the store's key schema (PK string hash key,
// SK string range key) and on-demand billing, and waits until it is ACTIVE.
// A table that already exists is waited for and its key schema checked.
// For development and emulators; production tables come from the
// infrastructure stack.
func CreateTable(ctx context.Context, client *dynamodb.Client, table string) error {
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrSK), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrSK), KeyType: types.KeyTypeRange},
		},
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("dynamo: create table %s: %w", table, translate(err))
	}
	w := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, 5*time.Second
	})
	out, err := w.WaitForOutput(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, 5*time.Minute)
	if err != nil {
		return fmt.Errorf("dynamo: wait for table %s to be active: %w", table, translate(err))
	}
	return checkSchema(table, out.Table)
}

func checkSchema(table string, d *types.TableDescription) error {
	if d == nil {
		return fmt.Errorf("%w: table %s: no description", ErrNotMetastore, table)
	}
	want := map[string]types.KeyType{attrPK: types.KeyTypeHash, attrSK: types.KeyTypeRange}
	if len(d.KeySchema) != len(want) {
		var keys []string
		for _, k := range d.KeySchema {
			keys = append(keys, fmt.Sprintf("%s (%s)", aws.ToString(k.AttributeName), k.KeyType))
		}
		return fmt.Errorf("%w: table %s has key %s, want PK (hash) and SK (range)", ErrNotMetastore, table, strings.Join(keys, ", "))
	}
	for _, k := range d.KeySchema {
		if want[aws.ToString(k.AttributeName)] != k.KeyType {
			return fmt.Errorf("%w: table %s has key %s (%s), want PK (hash) and SK (range)",
				ErrNotMetastore, table, aws.ToString(k.AttributeName), k.KeyType)
		}
	}
	for _, a := range d.AttributeDefinitions {
		if n := aws.ToString(a.AttributeName); (n == attrPK || n == attrSK) && a.AttributeType != types.ScalarAttributeTypeS {
			return fmt.Errorf("%w: table %s: key %s has type %s, want S", ErrNotMetastore, table, n, a.AttributeType)
		}
	}
	return nil
}

// throttleCodes are the DynamoDB error codes for a refused request.
var throttleCodes = map[string]bool{
	"ProvisionedThroughputExceededException": true,
	"RequestLimitExceeded":                   true,
	"ThrottlingException":                    true,
	"Throttling":                             true,
	"LimitExceededException":                 true,
	"TransactionInProgressException":         true,
	"TransactionConflictException":           true,
	"InternalServerError":                    true,
	"ServiceUnavailable":                     true,
}

// translate maps an SDK error that is not a condition failure to the
// metastore sentinels; see the package documentation.
func translate(err error) error {
	var status int
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code := ae.ErrorCode()
		switch {
		case throttleCodes[code] || status == 429 || status >= 500:
			return fmt.Errorf("%w: %w", metastore.ErrUnavailable, err)
		case code == "ValidationException" && tooLarge(ae.ErrorMessage()):
			return fmt.Errorf("%w: %w", metastore.ErrTooLarge, err)
		case code == "ValidationException":
			return fmt.Errorf("%w: %w", metastore.ErrInvalid, err)
		}
		return err
	}
	if status >= 500 {
		return fmt.Errorf("%w: %w", metastore.ErrUnavailable, err)
	}
	// No answer: timeouts, resets, a context that ended. The SDK has already
	// retried what it retries.
	return fmt.Errorf("%w: %w", metastore.ErrUnavailable, err)
}

// retryable reports whether a cancelled transaction wrote nothing for a
// reason that may pass on a retry.
func retryable(reasons []types.CancellationReason) bool {
	some := false
	for _, r := range reasons {
		switch aws.ToString(r.Code) {
		case "", "None":
		case "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded":
			some = true
		default:
			return false
		}
	}
	return some
}

// condFailed returns the indexes of the items whose condition failed.
func condFailed(reasons []types.CancellationReason) []int {
	var idx []int
	for i, r := range reasons {
		if aws.ToString(r.Code) == "ConditionalCheckFailed" {
			idx = append(idx, i)
		}
	}
	return idx
}

// transact runs one TransactWriteItems, after checkTx (ErrTooLarge before
// anything is sent). It returns (nil, nil) when the
// transaction was applied, (reasons, nil) when a condition failed (nothing
// was written; reasons[i] belongs to items[i], with the old item when the
// item asked for ALL_OLD), and (nil, err) otherwise, with err translated.
//
// The SDK fills ClientRequestToken once per call and reuses it on its own
// retries, so on DynamoDB a retry after a lost answer is idempotent: it
// reports success instead of failing the condition on the transaction's
// own write. An emulator may ignore the token (moto does), so a
// conditional transaction also carries a write id (markWrite): a
// condition that fails where the marked item holds this call's id failed
// on the transaction's own effect (it landed, and the answer was lost),
// and is success. A racer that makes the same change has another id and
// still loses.
func (st *Store) transact(ctx context.Context, items []types.TransactWriteItem) ([]types.CancellationReason, error) {
	wid, at, err := st.markWrite(items)
	if err != nil {
		return nil, err
	}
	if err := checkTx(items); err != nil {
		return nil, err
	}
	wait := TxBackoff
	for attempt := 1; ; attempt++ {
		_, err := st.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if err == nil {
			return nil, nil
		}
		var tce *types.TransactionCanceledException
		if !errors.As(err, &tce) {
			return nil, translate(err)
		}
		if len(condFailed(tce.CancellationReasons)) > 0 {
			if at >= 0 && st.landed(ctx, items[at], tce.CancellationReasons[at], wid) {
				return nil, nil
			}
			return tce.CancellationReasons, nil
		}
		if !retryable(tce.CancellationReasons) {
			for _, r := range tce.CancellationReasons {
				if aws.ToString(r.Code) == "ValidationError" && tooLarge(aws.ToString(r.Message)) {
					return nil, fmt.Errorf("%w: %w", metastore.ErrTooLarge, err)
				}
				if aws.ToString(r.Code) == "ValidationError" {
					return nil, fmt.Errorf("%w: %w", metastore.ErrInvalid, err)
				}
			}
			return nil, err
		}
		if attempt >= TxAttempts {
			return nil, fmt.Errorf("%w: transaction cancelled %d times: %w", metastore.ErrUnavailable, attempt, err)
		}
		if serr := st.sleep(ctx, wait); serr != nil {
			return nil, fmt.Errorf("%w: %w", metastore.ErrUnavailable, serr)
		}
		wait *= 2
	}
}

// markWrite gives a transaction that has a condition a write id: a
// random attrWID set by its first Put or Update (one suffices, the
// transaction being atomic), whose index it returns (-1: none marked).
// The item is copied, not changed in place: callers reuse their maps.
func (st *Store) markWrite(items []types.TransactWriteItem) (wid string, at int, err error) {
	at = -1
	conditional := false
	for i, it := range items {
		switch {
		case it.Put != nil:
			conditional = conditional || it.Put.ConditionExpression != nil
		case it.Update != nil:
			conditional = conditional || it.Update.ConditionExpression != nil
		case it.Delete != nil:
			conditional = conditional || it.Delete.ConditionExpression != nil
			continue
		default:
			conditional = true // a ConditionCheck
			continue
		}
		if at < 0 {
			at = i
		}
	}
	if !conditional || at < 0 {
		return "", -1, nil
	}
	var b [9]byte
	if _, err := io.ReadFull(st.rand, b[:]); err != nil {
		return "", -1, fmt.Errorf("dynamo: draw a write id: %w", err)
	}
	wid = base64.RawURLEncoding.EncodeToString(b[:])
	if p := items[at].Put; p != nil {
		cp := *p
		cp.Item = maps.Clone(p.Item)
		cp.Item[attrWID] = s(wid)
		items[at].Put = &cp
		return wid, at, nil
	}
	u := *items[at].Update
	expr := aws.ToString(u.UpdateExpression)
	if i := strings.Index(expr, "SET "); i >= 0 {
		expr = expr[:i+4] + "#wid = :wid, " + expr[i+4:]
	} else {
		expr = "SET #wid = :wid " + expr // only REMOVE clauses
	}
	u.UpdateExpression = aws.String(expr)
	u.ExpressionAttributeNames = maps.Clone(u.ExpressionAttributeNames)
	if u.ExpressionAttributeNames == nil {
		u.ExpressionAttributeNames = map[string]string{}
	}
	u.ExpressionAttributeNames["#wid"] = attrWID
	u.ExpressionAttributeValues = maps.Clone(u.ExpressionAttributeValues)
	if u.ExpressionAttributeValues == nil {
		u.ExpressionAttributeValues = map[string]types.AttributeValue{}
	}
	u.ExpressionAttributeValues[":wid"] = s(wid)
	items[at].Update = &u
	return wid, at, nil
}

// landed reports whether item (markWrite's) holds write id wid: the old
// item that came back with the refusal, else read back.
func (st *Store) landed(ctx context.Context, item types.TransactWriteItem, r types.CancellationReason, wid string) bool {
	stored := r.Item
	if stored == nil {
		k := map[string]types.AttributeValue{}
		if item.Put != nil {
			k[attrPK], k[attrSK] = item.Put.Item[attrPK], item.Put.Item[attrSK]
		} else {
			k = item.Update.Key
		}
		pk, ok1 := k[attrPK].(*types.AttributeValueMemberS)
		sk, ok2 := k[attrSK].(*types.AttributeValueMemberS)
		if !ok1 || !ok2 {
			return false
		}
		var err error
		if stored, err = st.getItem(ctx, pk.Value, sk.Value); err != nil {
			return false
		}
	}
	v, ok := stored[attrWID].(*types.AttributeValueMemberS)
	return ok && v.Value == wid
}

// getItem reads one item with a strongly consistent read; nil when absent.
func (st *Store) getItem(ctx context.Context, pk, sk string) (map[string]types.AttributeValue, error) {
	if len(pk) > maxPKBytes || len(sk) > maxSKBytes {
		return nil, nil // no write can have stored it; DynamoDB would refuse the key
	}
	out, err := st.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(st.table),
		Key:            key(pk, sk),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, translate(err)
	}
	return out.Item, nil
}

// query runs a Query page by page until limit items (0: all) are collected.
func (st *Store) query(ctx context.Context, in *dynamodb.QueryInput, limit int) ([]map[string]types.AttributeValue, error) {
	in.TableName = aws.String(st.table)
	in.ConsistentRead = aws.Bool(true)
	var items []map[string]types.AttributeValue
	for {
		if limit > 0 {
			in.Limit = aws.Int32(int32(min(limit-len(items), 1000)))
		}
		out, err := st.client.Query(ctx, in)
		if err != nil {
			return nil, translate(err)
		}
		items = append(items, out.Items...)
		if len(out.LastEvaluatedKey) == 0 || (limit > 0 && len(items) >= limit) {
			return items, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", metastore.ErrUnavailable, err)
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
