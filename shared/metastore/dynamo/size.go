package dynamo

import (
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/strandlog/strand/shared/metastore"
)

// itemSize is an item's size as DynamoDB counts it ("DynamoDB item sizes
// and formats"): every attribute's name plus its value's size.
func itemSize(m map[string]types.AttributeValue) int {
	n := 0
	for name, v := range m {
		n += len(name) + valueSize(v)
	}
	return n
}

// valueSize is one value's size: a string its UTF-8 bytes, a number 1 byte
// per two significant digits plus 1, binary its raw bytes, a Boolean or
// null 1 byte, a list or map 3 bytes plus 1 per element plus the elements
// (and a map's names).
func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberL:
		n := 3
		for _, x := range v.Value {
			n += 1 + valueSize(x)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for name, x := range v.Value {
			n += 1 + len(name) + valueSize(x)
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, x := range v.Value {
			n += len(x)
		}
		return n
	}
	return 0
}

func numberSize(s string) int {
	s = strings.TrimLeft(strings.TrimPrefix(s, "-"), "0")
	s = strings.Replace(s, ".", "", 1)
	s = strings.TrimRight(s, "0")
	return (len(s)+1)/2 + 1
}

// checkTx refuses, before sending, a transaction DynamoDB would refuse for
// its size: more than MaxTxItems actions, an item (a Put's, an Update's or
// a Delete's key) over MaxItemBytes, or an aggregate over MaxTxBytes. The
// emulator does not enforce these limits; DynamoDB does, with a
// ValidationException, which translate maps to the same ErrTooLarge.
func checkTx(items []types.TransactWriteItem) error {
	if len(items) > metastore.MaxTxItems {
		return fmt.Errorf("%w: transaction of %d actions, over %d", metastore.ErrTooLarge, len(items), metastore.MaxTxItems)
	}
	total := 0
	for i, it := range items {
		var n int
		switch {
		case it.Put != nil:
			n = itemSize(it.Put.Item)
		case it.Update != nil:
			n = itemSize(it.Update.Key)
			for _, v := range it.Update.ExpressionAttributeValues {
				n += valueSize(v)
			}
		case it.Delete != nil:
			n = itemSize(it.Delete.Key)
		case it.ConditionCheck != nil:
			n = itemSize(it.ConditionCheck.Key)
		}
		if n > metastore.MaxItemBytes {
			return fmt.Errorf("%w: transaction action %d: item of %d bytes, over %d", metastore.ErrTooLarge, i, n, metastore.MaxItemBytes)
		}
		total += n
	}
	if total > metastore.MaxTxBytes {
		return fmt.Errorf("%w: transaction of %d bytes, over %d", metastore.ErrTooLarge, total, metastore.MaxTxBytes)
	}
	return nil
}

// tooLarge reports whether a DynamoDB validation message is about a size
// limit (item size, transaction size, key size).
func tooLarge(msg string) bool {
	msg = strings.ToLower(msg)
	return strings.Contains(msg, "size") && (strings.Contains(msg, "exceed") || strings.Contains(msg, "limit") || strings.Contains(msg, "too large"))
}
