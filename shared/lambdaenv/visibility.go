package lambdaenv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
)

// Visibility changes the visibility of received SQS messages: the
// absorb.Visibility of the absorb function. It needs
// sqs:ChangeMessageVisibility on the queue.
type Visibility struct {
	Client *sqs.Client
}

// ChangeVisibility makes the message visible again after d (whole seconds,
// rounded up; SQS takes 0 to 43200).
func (v *Visibility) ChangeVisibility(ctx context.Context, queueARN, receiptHandle string, d time.Duration) error {
	url, err := QueueURL(queueARN)
	if err != nil {
		return err
	}
	secs := int32(min((d+time.Second-1)/time.Second, 43200))
	_, err = v.Client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl:          aws.String(url),
		ReceiptHandle:     aws.String(receiptHandle),
		VisibilityTimeout: max(secs, 0),
	})
	if err != nil {
		return fmt.Errorf("lambdaenv: change visibility of a message of %s: %w", queueARN, err)
	}
	return nil
}

// QueueURL is the URL of the SQS queue with the given ARN
// (arn:PARTITION:sqs:REGION:ACCOUNT:NAME, as a Lambda SQS event names its
// source): https://sqs.REGION.amazonaws.com/ACCOUNT/NAME (.com.cn in the
// China partition).
func QueueURL(arn string) (string, error) {
	p := strings.Split(arn, ":")
	if len(p) != 6 || p[0] != "arn" || p[2] != "sqs" || p[3] == "" || p[4] == "" || p[5] == "" {
		return "", fmt.Errorf("lambdaenv: %q is not an SQS queue ARN", arn)
	}
	domain := "amazonaws.com"
	if p[1] == "aws-cn" {
		domain = "amazonaws.com.cn"
	}
	return "https://sqs." + p[3] + "." + domain + "/" + p[4] + "/" + p[5], nil
}

// ReceiptExpired reports whether err is SQS refusing a receipt handle
// whose visibility timeout has ended: on a FIFO queue AWS (and LocalStack)
// answer DeleteMessage and ChangeMessageVisibility with InvalidParameterValue
// "The receipt handle has expired" (moto accepts the handle). The message is
// then visible again and comes back with a new handle, as when its
// consumer failed: a consumer that deletes after handling treats it so.
func ReceiptExpired(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "InvalidParameterValue" &&
		strings.Contains(ae.ErrorMessage(), "receipt handle has expired")
}
