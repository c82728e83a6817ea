"""Shared by the network-namespace tests: a command runner and whether this machine can make namespaces with nftables
(root, `ip`, `nft`)."""
import os
import shutil
import subprocess


def sh(*args, input=None, check=True):
    return subprocess.run(list(args), input=input, check=check, capture_output=True, text=True, timeout=30)


def netns_available(prefix: str) -> bool:
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nft"):
        return False
    name = f"{prefix}probe{os.getpid()}"
    ok = sh("ip", "netns", "add", name, check=False).returncode == 0
    if ok:
        ok = sh("ip", "netns", "exec", name, "nft", "list", "ruleset", check=False).returncode == 0
        sh("ip", "netns", "del", name, check=False)
    return ok
