#!/usr/bin/env python3
"""Checks that each publishable crate's `rust-version` is at least that of
every crate it needs to build (normal and build dependencies, as resolved in
Cargo.lock), so the declared minimum Rust version is true.

    python3 scripts/check-rust-version.py     (exit 1 and a message if not)
"""
import json
import subprocess
import sys


def version(text):
    return tuple(int(part) for part in text.split(".")) if text else ()


def main():
    metadata = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--locked"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    packages = {p["id"]: p for p in metadata["packages"]}
    nodes = {n["id"]: n for n in metadata["resolve"]["nodes"]}
    failed = False
    for member in metadata["workspace_members"]:
        package = packages[member]
        if package.get("publish") == []:
            continue  # publish = false: not for crates.io
        # Everything it builds with: normal and build dependencies, transitively.
        seen, todo = set(), [member]
        while todo:
            for dep in nodes[todo.pop()]["deps"]:
                kinds = {k["kind"] for k in dep["dep_kinds"]}
                if kinds & {None, "build"} and dep["pkg"] not in seen:
                    seen.add(dep["pkg"])
                    todo.append(dep["pkg"])
        needed = max(
            ((version(packages[d].get("rust_version")), packages[d]) for d in seen),
            key=lambda pair: pair[0],
            default=((), None),
        )
        declared = package.get("rust_version")
        if needed[1] is None:
            print(f"{package['name']}: rust-version {declared}, no dependencies")
            continue
        need, by = needed
        line = (
            f"{package['name']}: rust-version {declared}; its dependencies need "
            f"{'.'.join(map(str, need))} ({by['name']} {by['version']})"
        )
        if version(declared) < need:
            print(f"error: {line}", file=sys.stderr)
            failed = True
        else:
            print(line)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
