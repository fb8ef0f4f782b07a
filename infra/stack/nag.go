package stack

import (
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// The stack passes cdk-nag's AwsSolutions pack (infra/stack
// TestNagAwsSolutions runs it on every synthesized configuration). Each
// finding the design accepts is suppressed next to its resource with
// suppress, naming the rule, the exact findings (appliesTo, when the rule
// reports several) and why.

// nagException is one suppressed cdk-nag rule: its id, the findings it
// covers (regular expressions over cdk-nag's "appliesTo" strings, e.g.
// "Resource::<...>/chains/*"; none: every finding of the rule on the
// construct) and the reason.
type nagException struct {
	rule      string
	appliesTo []string
	reason    string
}

// suppress records exceptions on c and its children.
func suppress(c constructs.IConstruct, exceptions ...nagException) {
	var ss []*cdknag.NagPackSuppression
	for _, e := range exceptions {
		s := &cdknag.NagPackSuppression{Id: jsii.String(e.rule), Reason: jsii.String(e.reason)}
		if len(e.appliesTo) > 0 {
			var at []any
			for _, re := range e.appliesTo {
				at = append(at, &cdknag.RegexAppliesTo{Regex: jsii.String(re)})
			}
			s.AppliesTo = &at
		}
		ss = append(ss, s)
	}
	cdknag.NagSuppressions_AddResourceSuppressions(c, &ss, jsii.Bool(true))
}

// objectKeys is the IAM5 exception for object actions on keys under a
// prefix (or all keys) of strand's own Standard buckets: an S3 object ARN
// names keys by a prefix and a wildcard; the actions are listed one by one
// (TestIAMNoWildcardActions), and TestLeastPrivilege checks each
// principal's prefixes.
func objectKeys() nagException {
	return nagException{
		rule:      "AwsSolutions-IAM5",
		appliesTo: []string{`/^Resource::<Storage(Chain|Settled)[0-9A-F]+\.Arn>\/([a-z0-9-]+\/)*\*$/`},
		reason: "object actions (listed one by one, no wildcard action) on the keys under strand's own prefixes of its buckets: " +
			"an S3 object ARN can only name keys by prefix and wildcard",
	}
}

// switchedOff is the exception for an observability extra the
// configuration turned off.
func switchedOff(rule, key string) nagException {
	return nagException{rule: rule, reason: "turned off by " + key + "=false for this deployment (on by default; docs/deploy.md, Observability)"}
}
