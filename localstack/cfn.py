"""The CDK stack's template, made deployable to LocalStack's core, and the
check of what a deployment created against it (localstack/cfn.sh runs both).

  python3 cfn.py prepare TEMPLATE SUPPORTED_TYPES_FILE OUT  -> prints the report
  python3 cfn.py check TEMPLATE_OUT RESOURCES_JSON QUEUES_JSON

prepare stands the Express set in as localstack/ does (each
AWS::S3Express::DirectoryBucket becomes a general-purpose AWS::S3::Bucket;
their policies, written for s3express actions, are left out), leaves out
every resource whose type the core has no provider for and every resource
that refers to one left out (Ref, Fn::GetAtt, Fn::Sub, DependsOn), and drops
the CDK bootstrap version rule (no bootstrap stack there). Outputs that refer
to a left-out resource go too.

check compares the deployed stack with the prepared template: every
resource created (CREATE_COMPLETE), each queue's retention, visibility
timeout and redrive. (The Lambdas' configuration is check.sh's: deploy.sh
creates them outside CloudFormation from stack.env, the same template's.)
"""

import json
import re
import sys

STOOD_IN = {"AWS::S3Express::DirectoryBucket": "AWS::S3::Bucket"}

# Resources the core has a provider for but cannot create here: replaced by
# literals (their Ref and Fn::GetAtt Arn), cfn.sh creates them elsewhere.
# DynamoDB: the core serves it only through DynamoDB Local (not installed);
# the table goes on moto's DynamoDB, under TABLE.
TABLE = "strand-cfn-table"
LITERAL = {"AWS::DynamoDB::Table": (TABLE, "arn:aws:dynamodb:us-east-1:000000000000:table/" + TABLE)}

# Resources the core has a provider for but cannot create without Docker,
# left out with their dependents: a Lambda stays Failed ("Installation of
# lambda-runtime ... failed"), which fails the stack. deploy.sh creates the
# functions outside CloudFormation and check.sh compares their
# configuration with stack.env (the same template's).
UNCREATABLE = {"AWS::Lambda::Function": "no Lambda without Docker in LocalStack's core"}


def replace_refs(node, lid, ref, arn):
    """node with every Ref/GetAtt Arn of lid replaced by the literals."""
    if isinstance(node, dict):
        if node == {"Ref": lid}:
            return ref
        ga = node.get("Fn::GetAtt")
        if len(node) == 1 and ga in ([lid, "Arn"], lid + ".Arn"):
            return arn
        return {k: replace_refs(v, lid, ref, arn) for k, v in node.items()}
    if isinstance(node, list):
        return [replace_refs(v, lid, ref, arn) for v in node]
    return node


def refs(node):
    """Logical ids node refers to."""
    out = set()
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "Ref" and isinstance(v, str):
                out.add(v)
            elif k == "Fn::GetAtt":
                out.add(v[0] if isinstance(v, list) else v.split(".")[0])
            elif k == "Fn::Sub":
                s = v[0] if isinstance(v, list) else v
                out.update(m.split(".")[0] for m in re.findall(r"\$\{([^}!]+)\}", s))
                if isinstance(v, list):
                    out.update(refs(v[1]))
            else:
                out.update(refs(v))
    elif isinstance(node, list):
        for v in node:
            out.update(refs(v))
    return out


def prepare(template_path, supported_path, out_path):
    t = json.load(open(template_path))
    supported = {l.strip().lower() for l in open(supported_path) if l.strip()}
    res = t["Resources"]
    dropped = {}
    literal = {}
    for lid, r in list(res.items()):
        if r["Type"] in LITERAL:
            ref, arn = LITERAL[r["Type"]]
            literal[lid] = r["Type"] + " -> " + ref
            del res[lid]
            t["Resources"] = res = replace_refs(res, lid, ref, arn)
            t["Outputs"] = replace_refs(t.get("Outputs", {}), lid, ref, arn)
    for lid, r in res.items():
        typ = r["Type"]
        if typ in STOOD_IN:
            r["Type"] = STOOD_IN[typ]
            # A directory bucket's name (--x-s3) and zone are not a
            # general-purpose bucket's: let CloudFormation name it.
            r["Properties"] = {}
        elif typ == "AWS::S3Express::BucketPolicy":
            dropped[lid] = typ + " (s3express actions)"
        elif typ in UNCREATABLE:
            dropped[lid] = typ + " (" + UNCREATABLE[typ] + ")"
        elif typ.lower() not in supported:
            dropped[lid] = typ + " (no provider in LocalStack's core)"
    changed = True
    while changed:
        changed = False
        for lid, r in res.items():
            if lid in dropped:
                continue
            deps = refs(r) | set(r.get("DependsOn", []) if isinstance(r.get("DependsOn"), list) else [r["DependsOn"]] if "DependsOn" in r else [])
            gone = sorted(d for d in deps if d in dropped)
            if gone:
                dropped[lid] = r["Type"] + " (refers to " + ", ".join(gone) + ")"
                changed = True
    for lid in dropped:
        del res[lid]
    t.pop("Rules", None)
    t.get("Parameters", {}).pop("BootstrapVersion", None)
    for k in [k for k, o in t.get("Outputs", {}).items() if refs(o) & set(dropped)]:
        del t["Outputs"][k]
    json.dump(t, open(out_path, "w"), indent=1)
    print("kept %d resources; stood in %d directory buckets; left out %d:" % (
        len(res), sum(1 for r in json.load(open(template_path))["Resources"].values() if r["Type"] in STOOD_IN), len(dropped)))
    for lid in sorted(dropped):
        print("  %s %s" % (lid, dropped[lid]))
    print("replaced by literals (created outside the stack) %d:" % len(literal))
    for lid in sorted(literal):
        print("  %s %s" % (lid, literal[lid]))


def check(template_path, resources_path, queues_path):
    t = json.load(open(template_path))["Resources"]
    deployed = {r["LogicalResourceId"]: r for r in json.load(open(resources_path))["StackResources"]}
    errors = []
    for lid, r in t.items():
        d = deployed.get(lid)
        if d is None:
            errors.append("%s (%s): not in the stack" % (lid, r["Type"]))
        elif d["ResourceStatus"] != "CREATE_COMPLETE":
            errors.append("%s (%s): %s %s" % (lid, r["Type"], d["ResourceStatus"], d.get("ResourceStatusReason", "")))
    queues = json.load(open(queues_path))  # logical id -> attributes
    for lid, attrs in queues.items():
        p = t[lid].get("Properties", {})
        for prop, attr in (("MessageRetentionPeriod", "MessageRetentionPeriod"), ("VisibilityTimeout", "VisibilityTimeout")):
            if prop in p and str(p[prop]) != attrs.get(attr):
                errors.append("queue %s: %s %s, the template's %s" % (lid, attr, attrs.get(attr), p[prop]))
        if "RedrivePolicy" in p:
            got = json.loads(attrs.get("RedrivePolicy", "{}"))
            if str(got.get("maxReceiveCount")) != str(p["RedrivePolicy"]["maxReceiveCount"]):
                errors.append("queue %s: maxReceiveCount %s, the template's %s" % (lid, got.get("maxReceiveCount"), p["RedrivePolicy"]["maxReceiveCount"]))
    for e in errors:
        print("cfn: " + e)
    print("cfn: %d resources of the prepared template, %d created; %d queues compared: %s" % (
        len(t), sum(1 for d in deployed.values() if d["ResourceStatus"] == "CREATE_COMPLETE"), len(queues),
        "as the template" if not errors else "%d differences" % len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "prepare":
        prepare(*sys.argv[2:])
    elif len(sys.argv) == 5 and sys.argv[1] == "check":
        sys.exit(check(*sys.argv[2:]))
    else:
        sys.exit(__doc__)
