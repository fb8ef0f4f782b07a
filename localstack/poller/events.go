package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// ErrSweepEvent is a message on the sweep queue that is not a scheduled
// event of one of the settlement functions' rules.
var ErrSweepEvent = errors.New("poller: not a settlement sweep event")

// sqsEvent is the event Lambda's SQS event source mapping hands the
// function for msgs received from the queue queueARN: the same JSON shape
// (events.SQSEvent), system attributes included (the message group id the
// absorb handler checks).
func sqsEvent(queueARN, region string, msgs []sqstypes.Message) events.SQSEvent {
	var ev events.SQSEvent
	for _, m := range msgs {
		attrs := map[string]events.SQSMessageAttribute{}
		for k, v := range m.MessageAttributes {
			attrs[k] = events.SQSMessageAttribute{StringValue: v.StringValue, BinaryValue: v.BinaryValue, DataType: aws.ToString(v.DataType)}
		}
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
			Md5OfBody: aws.ToString(m.MD5OfBody), Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
			Attributes: m.Attributes, MessageAttributes: attrs,
			EventSourceARN: queueARN, EventSource: "aws:sqs", AWSRegion: region,
		})
	}
	return ev
}

// sweepFunction reads a scheduled event as EventBridge delivers it to a
// target (here the sweep queue) and returns the settlement function whose
// sweep rule ("strand-<function>-sweep", as deploy.sh names them) fired.
func sweepFunction(body []byte, functions []string) (string, error) {
	var ev struct {
		DetailType string   `json:"detail-type"`
		Source     string   `json:"source"`
		Resources  []string `json:"resources"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		return "", fmt.Errorf("%w: %v", ErrSweepEvent, err)
	}
	if ev.DetailType != "Scheduled Event" || ev.Source != "aws.events" || len(ev.Resources) != 1 {
		return "", fmt.Errorf("%w: detail-type %q, source %q, %d resources", ErrSweepEvent, ev.DetailType, ev.Source, len(ev.Resources))
	}
	_, rule, ok := strings.Cut(ev.Resources[0], ":rule/")
	if !ok || !strings.HasPrefix(ev.Resources[0], "arn:") {
		return "", fmt.Errorf("%w: resource %q is not a rule ARN", ErrSweepEvent, ev.Resources[0])
	}
	name, ok := strings.CutPrefix(rule, "strand-")
	if ok {
		name, ok = strings.CutSuffix(name, "-sweep")
	}
	for _, f := range functions {
		if ok && name == f {
			return f, nil
		}
	}
	return "", fmt.Errorf("%w: rule %q sweeps none of %v", ErrSweepEvent, rule, functions)
}

// failedIDs are the message ids a function's partial-batch response
// reports failed (events.SQSEventResponse); a response that is not one
// (null, or another shape) fails none.
func failedIDs(resp []byte) (map[string]bool, error) {
	out := map[string]bool{}
	if len(resp) == 0 || string(resp) == "null" {
		return out, nil
	}
	var r events.SQSEventResponse
	if err := json.Unmarshal(resp, &r); err != nil {
		return nil, fmt.Errorf("poller: batch response %.200q: %w", resp, err)
	}
	for _, f := range r.BatchItemFailures {
		out[f.ItemIdentifier] = true
	}
	return out, nil
}
