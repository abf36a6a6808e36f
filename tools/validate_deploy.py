#!/usr/bin/env python3
"""Validates deploy/ against the schedulers' own API schemas, offline.

- Kubernetes: deploy/kubernetes/*.yaml against the OpenAPI schemas of several Kubernetes
  versions (kubernetes-validate, strict: unknown fields are errors).
- AWS Batch: deploy/aws-batch/*.json as the input of RegisterJobDefinition, checked by botocore's
  parameter validator against the Batch service model it ships; plus the rules the model does
  not encode (every Ref:: has a parameter, evaluateOnExit patterns and their limit of 5).
- Both: the voxseg arguments name a `batch` run whose shard count and grace period fit the
  scheduler's settings (--shards equals the completions; --grace below the kill delay).

    python3 tools/validate_deploy.py            # pip install kubernetes-validate botocore

Exit status: 0 valid, 1 a file is invalid (each problem printed), 77 a validator is not
installed (the ctest wrapper reports that as skipped).
"""
from __future__ import annotations

import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
KUBERNETES_VERSIONS = ["1.29", "1.31", "1.33", "1.35"]  # 1.29: backoffLimitPerIndex is beta


def option(args: list[str], name: str) -> str | None:
    """Value of --name=V or --name V in an argument list."""
    for i, a in enumerate(args):
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
        if a == name and i + 1 < len(args):
            return args[i + 1]
    return None


def check_kubernetes(problems: list[str]) -> int:
    import kubernetes_validate
    import yaml

    checked = 0
    for path in sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            for version in KUBERNETES_VERSIONS:
                try:
                    kubernetes_validate.validate(doc, version, strict=True)
                except kubernetes_validate.ValidationError as e:
                    problems.append(f"{path.name} (Kubernetes {version}): {e.message} at "
                                    f"{'.'.join(str(p) for p in e.path)}")
            if doc.get("kind") != "Job":
                continue
            spec = doc["spec"]
            pod = spec["template"]["spec"]
            (container,) = [c for c in pod["containers"] if c["name"] == "voxseg"]
            args = container.get("args", [])
            if args[:1] != ["batch"]:
                problems.append(f"{path.name}: the voxseg container does not run `batch`")
            shards = option(args, "--shards")
            if shards is None or int(shards) != spec.get("completions"):
                problems.append(f"{path.name}: --shards {shards} != completions "
                                f"{spec.get('completions')}")
            if spec.get("completionMode") != "Indexed":
                problems.append(f"{path.name}: completionMode must be Indexed "
                                "(JOB_COMPLETION_INDEX picks the shard)")
            grace = float(option(args, "--grace") or 60)
            if grace >= pod.get("terminationGracePeriodSeconds", 30):
                problems.append(f"{path.name}: --grace {grace} not below "
                                "terminationGracePeriodSeconds")
            codes = {c for r in spec.get("podFailurePolicy", {}).get("rules", [])
                     for c in r.get("onExitCodes", {}).get("values", [])
                     if r["action"] == "Ignore"}
            if 10 not in codes:
                problems.append(f"{path.name}: exit code 10 (stopped by SIGTERM) is not retried")
            checked += 1
    return checked


def check_aws_batch(problems: list[str]) -> int:
    import botocore.session
    from botocore.validate import ParamValidator

    model = botocore.session.get_session().get_service_model("batch")
    shape = model.operation_model("RegisterJobDefinition").input_shape
    checked = 0
    for path in sorted((ROOT / "deploy" / "aws-batch").glob("*.json")):
        definition = json.loads(path.read_text())
        report = ParamValidator().validate(definition, shape)
        if report.has_errors():
            problems.append(f"{path.name}: {report.generate_report()}")
        command = definition["containerProperties"]["command"]
        params = definition.get("parameters", {})
        for arg in command:
            for ref in re.findall(r"Ref::(\w+)", arg):
                if ref not in params:
                    problems.append(f"{path.name}: {arg} has no default in parameters")
        if command[:1] != ["batch"]:
            problems.append(f"{path.name}: the command does not run `voxseg batch`")
        if option(command, "--shards") is None:
            problems.append(f"{path.name}: no --shards (AWS_BATCH_JOB_ARRAY_INDEX needs it)")
        grace = float(option(command, "--grace") or 60)
        if grace >= 30:  # the ECS agent's default stop timeout
            problems.append(f"{path.name}: --grace {grace} not below ECS's 30 s stop timeout")
        rules = definition.get("retryStrategy", {}).get("evaluateOnExit", [])
        if len(rules) > 5:
            problems.append(f"{path.name}: evaluateOnExit allows 5 entries, has {len(rules)}")
        for r in rules:
            for key in ("onExitCode", "onReason", "onStatusReason"):
                value = r.get(key)
                # Batch: letters, digits, . : and white space, an optional * at the end only.
                if value is not None and not re.fullmatch(r"[A-Za-z0-9.: ]*\*?", value):
                    problems.append(f"{path.name}: {key} pattern {value!r} is not accepted")
        if not any(r.get("onExitCode") == "10" and r["action"] == "RETRY" for r in rules):
            problems.append(f"{path.name}: exit code 10 (stopped by SIGTERM) is not retried")
        checked += 1
    return checked


def main() -> int:
    try:
        import botocore  # noqa: F401
        import kubernetes_validate  # noqa: F401
        import yaml  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {e.name} not installed (pip install kubernetes-validate botocore pyyaml)")
        return 77
    problems: list[str] = []
    k8s = check_kubernetes(problems)
    aws = check_aws_batch(problems)
    for p in problems:
        print("INVALID:", p)
    if not problems:
        print(f"valid: {k8s} Kubernetes Job(s) against Kubernetes {', '.join(KUBERNETES_VERSIONS)} "
              f"(strict); {aws} AWS Batch job definition(s) against botocore "
              f"{__import__('botocore').__version__}'s Batch model")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
