package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
)

// Least privilege: every grant below names its actions one by one (no
// wildcard action anywhere in an identity policy) and the exact resources
// (bucket, object prefix, table, queue). Directory buckets authorize object
// calls through s3express:CreateSession; readers get ReadOnly sessions.

// Table actions by use. No Scan: shared/metastore/dynamo lists streams by
// a Query on its listing partition, and nothing else walks the table.
var (
	// No batch actions: the metastore uses none (ref deletes are
	// conditional, so they go in transactions, issue 13).
	tableRead = []string{"dynamodb:GetItem", "dynamodb:Query", "dynamodb:ConditionCheckItem"}
	// Transactions need no actions of their own: TransactWriteItems and
	// TransactGetItems are authorized per item by these and tableRead's.
	tableWrite = []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"}
)

// access collects the statements of one principal.
type access struct {
	stmts []awsiam.PolicyStatement
	// readOnlyExpress: Express sessions are granted in ReadOnly mode only
	// (the client must ask for that mode: fnEnv).
	readOnlyExpress bool
}

func (a *access) allow(actions []string, resources []*string, cond map[string]any) {
	props := &awsiam.PolicyStatementProps{
		Effect:    awsiam.Effect_ALLOW,
		Actions:   jsii.Strings(actions...),
		Resources: &resources,
	}
	if cond != nil {
		props.Conditions = &cond
	}
	a.stmts = append(a.stmts, awsiam.NewPolicyStatement(props))
}

// table grants actions on the table itself (it has no indexes).
func (a *access) table(m *Metastore, actions ...[]string) {
	var all []string
	for _, g := range actions {
		all = append(all, g...)
	}
	a.allow(all, []*string{m.Table.TableArn()}, nil)
}

// expressSession grants CreateSession on every directory bucket; readOnly
// restricts the sessions to ReadOnly mode (GET/HEAD/List only).
func (a *access) expressSession(s *Storage, readOnly bool) {
	var cond map[string]any
	if readOnly {
		cond = map[string]any{"StringEquals": map[string]any{"s3express:SessionMode": "ReadOnly"}}
		a.readOnlyExpress = true
	}
	a.allow([]string{"s3express:CreateSession"}, s.ExpressArns, cond)
}

// objects grants object actions under prefix in a Standard bucket. list
// adds s3:ListBucket on the bucket, without which a missing key reads as
// 403 instead of 404 (objstore needs ErrNotFound).
func (a *access) objects(bucketArn *string, prefix string, list bool, actions ...string) {
	a.allow(actions, []*string{jsii.String(*bucketArn + "/" + prefix + "*")}, nil)
	if list {
		a.allow([]string{"s3:ListBucket"}, []*string{bucketArn}, nil)
	}
}

// applyTo adds every statement to the role's default (inline) policy.
func (a *access) applyTo(role awsiam.IRole) {
	for _, s := range a.stmts {
		role.AddToPrincipalPolicy(s)
	}
}
