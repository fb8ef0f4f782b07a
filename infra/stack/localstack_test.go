package stack

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var updateLocalStack = flag.Bool("update-localstack", false, "rewrite localstack/stack.env from the synthesized template")

// localStackDescription is the settlement back end of the default stack as
// localstack/stack.env describes it to the LocalStack scripts (the init
// hook's queues, deploy.sh's Lambdas, schedules and environment), read
// from the synthesized template: queue retention, visibility and redrive,
// each function's memory, timeout, sweep period and every environment
// value that is not a resource's name (those are mapped to
// localstack/strand.env's names).
func localStackDescription(t *testing.T, s *synthesized) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(`# The settlement back end as the CDK stack (infra/stack, default
# configuration) deploys it: queues, Lambda sizes, sweeps and environment.
# GENERATED from the synthesized template; do not edit. infra/stack's
# TestLocalStackDescription fails when this file and the template differ;
# rewrite it with (in infra/): go test ./stack -run TestLocalStackDescription -update-localstack
# Read by init/ready.d/10-strand.sh (queues) and deploy.sh (Lambdas).
`)
	queues := s.ofType("AWS::SQS::Queue")
	role := func(p map[string]any) string {
		_, redrive := p["RedrivePolicy"].(map[string]any)
		switch {
		case p["FifoQueue"] == true && redrive:
			return "RELEASE"
		case p["FifoQueue"] == true:
			return "RELEASE_DLQ"
		case redrive:
			return "FENCE"
		default:
			return "FENCE_DLQ"
		}
	}
	seen := map[string]string{}
	for _, id := range sortedKeys(queues) {
		p := props(queues[id])
		r := role(p)
		if prev, dup := seen[r]; dup {
			t.Fatalf("queues %s and %s both look like the %s queue", prev, id, r)
		}
		seen[r] = id
		fmt.Fprintf(&b, "STRAND_%s_RETENTION_SECONDS=%v\n", r, num(t, id+" MessageRetentionPeriod", p["MessageRetentionPeriod"]))
		if rp, ok := p["RedrivePolicy"].(map[string]any); ok {
			fmt.Fprintf(&b, "STRAND_%s_VISIBILITY_SECONDS=%v\n", r, num(t, id+" VisibilityTimeout", p["VisibilityTimeout"]))
			fmt.Fprintf(&b, "STRAND_%s_MAX_RECEIVES=%v\n", r, num(t, id+" maxReceiveCount", rp["maxReceiveCount"]))
		}
	}
	if len(seen) != 4 {
		t.Fatalf("queues %v, want release, fence and a DLQ each", seen)
	}
	// Each function's sweep: the rule whose target is the function.
	sweeps := map[string]string{}
	rate := regexp.MustCompile(`^rate\(\d+ (minute|minutes|hour|hours)\)$`)
	for id, r := range s.ofType("AWS::Events::Rule") {
		p := props(r)
		expr := fmt.Sprint(p["ScheduleExpression"])
		if !rate.MatchString(expr) {
			t.Fatalf("%s: schedule %v is not rate(N minutes or hours)", id, expr)
		}
		for _, tg := range p["Targets"].([]any) {
			if ga, ok := tg.(map[string]any)["Arn"].(map[string]any)["Fn::GetAtt"].([]any); ok {
				sweeps[fmt.Sprint(ga[0])] = expr
			}
		}
	}
	fns := s.ofType("AWS::Lambda::Function")
	var names []string
	for _, id := range sortedKeys(fns) {
		p := props(fns[id])
		name, ok := p["FunctionName"].(string)
		if !ok {
			t.Fatalf("%s: FunctionName %v is not a literal", id, p["FunctionName"])
		}
		name = name[strings.LastIndex(name, "-")+1:]
		if !slices.Contains(FunctionNames, name) {
			continue // not a settlement function (custom resources' handlers)
		}
		names = append(names, name)
		up := strings.ToUpper(name)
		if sweeps[id] == "" {
			t.Fatalf("%s (%s) has no sweep", id, name)
		}
		fmt.Fprintf(&b, "STRAND_%s_MEMORY_MIB=%v\nSTRAND_%s_TIMEOUT_SECONDS=%v\nSTRAND_%s_SWEEP=\"%s\"\n",
			up, num(t, id+" MemorySize", p["MemorySize"]), up, num(t, id+" Timeout", p["Timeout"]), up, sweeps[id])
		vars := p["Environment"].(map[string]any)["Variables"].(map[string]any)
		var env []string
		for _, k := range sortedKeys(vars) {
			v, literal := vars[k].(string)
			if !literal {
				continue // a resource's name (Ref, Fn::Join): strand.env names it
			}
			if strings.ContainsAny(k+v, " \"'$`\\") {
				t.Fatalf("%s: environment %s=%q cannot be written as one word", id, k, v)
			}
			env = append(env, k+"="+v)
		}
		fmt.Fprintf(&b, "STRAND_%s_ENV=\"%s\"\n", up, strings.Join(env, " "))
	}
	slices.Sort(names)
	want := slices.Clone(FunctionNames)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("settlement functions %v, want %v", names, want)
	}
	return b.String()
}

func num(t *testing.T, what string, v any) string {
	t.Helper()
	f, ok := v.(float64)
	if !ok || f != float64(int64(f)) {
		t.Fatalf("%s: %v is not a whole number", what, v)
	}
	return fmt.Sprint(int64(f))
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestLocalStackDescription: localstack/stack.env, from which the
// LocalStack init hook creates the queues and deploy.sh sizes, schedules
// and configures the Lambdas, says what the default stack's template
// says. (It once drifted: retention on the DLQs only, no
// STRAND_PASS_INDEX, GOMEMLIMIT or STRAND_WINDOW_CACHE_MIB, settle at 1024
// MB against the stack's 2048.)
//
// With STRAND_TEMPLATE_OUT set it also writes the default stack's template
// there (localstack/cfn.sh deploys it to LocalStack's CloudFormation).
func TestLocalStackDescription(t *testing.T) {
	s := defaults(t)
	got := localStackDescription(t, s)
	if out := os.Getenv("STRAND_TEMPLATE_OUT"); out != "" {
		b, err := json.MarshalIndent(s.tmpl.ToJSON(), "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(repoRoot, "localstack", "stack.env")
	if *updateLocalStack {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it with -update-localstack)", err)
	}
	if string(b) != got {
		t.Errorf("localstack/stack.env differs from the template; rewrite it with -update-localstack.\nfile:\n%s\ntemplate:\n%s", b, got)
	}
	// The scripts read the description, not numbers of their own.
	own := map[string][]*regexp.Regexp{
		"init/ready.d/10-strand.sh": {regexp.MustCompile(`"(MessageRetentionPeriod|VisibilityTimeout)":"\d`), regexp.MustCompile(`maxReceiveCount\\+":\\+"\d`)},
		"deploy.sh":                 {regexp.MustCompile(`rate\(\d`), regexp.MustCompile(`(?m)^\s*(absorb|settle|trim|probe) \d+ \d+`)},
	}
	for f, res := range own {
		src, err := os.ReadFile(filepath.Join(repoRoot, "localstack", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, re := range res {
			if m := re.Find(src); m != nil {
				t.Errorf("localstack/%s has a figure of its own (%q): take it from stack.env", f, m)
			}
		}
		if !strings.Contains(string(src), "stack.env") {
			t.Errorf("localstack/%s does not read stack.env", f)
		}
	}
}
