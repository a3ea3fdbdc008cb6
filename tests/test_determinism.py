"""One scenario + one seed = one history, byte for byte, in any process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from eosim.simulation import load_scenario, run_scenario

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "idempotent-restart.yaml"
SMALL = ["producers.0.workload.records=2000"]
DIGEST = (
    "from eosim.simulation import load_scenario, run_scenario\n"
    f"r = run_scenario(load_scenario({str(SCENARIO)!r}, {SMALL!r}), 11)\n"
    "print(r.history.digest())\n"
)


def _digest_in_subprocess(hash_seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    out = subprocess.run(
        [sys.executable, "-c", DIGEST], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def test_same_seed_same_history_across_processes():
    digests = {_digest_in_subprocess(h) for h in ("0", "1", "12345")}
    assert len(digests) == 1
    here = run_scenario(load_scenario(SCENARIO, SMALL), 11)
    assert here.history.digest() in digests


def test_different_seeds_give_different_histories():
    s = load_scenario(SCENARIO, SMALL)
    assert run_scenario(s, 1).history.digest() != run_scenario(s, 2).history.digest()


def test_history_digest_covers_the_written_bytes(tmp_path):
    import hashlib

    s = load_scenario(SCENARIO, ["producers.0.workload.records=500"])
    r = run_scenario(s, 3)
    path = tmp_path / "h.jsonl"
    with path.open("w", encoding="utf-8", newline="\n") as f:
        r.history.write(f)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == r.history.digest()


def test_a_replicated_run_is_the_same_across_processes():
    """Replicas, the controller, follower fetchers and replicated coordinator logs: still one
    history per seed, whatever the hash seed."""
    scenario = ROOT / "scenarios" / "replication-transactional-pipeline.yaml"
    small = ["producers.0.workload.records=300"]
    code = (
        "from eosim.simulation import load_scenario, run_scenario\n"
        f"r = run_scenario(load_scenario({str(scenario)!r}, {small!r}), 3)\n"
        "print(r.history.digest())\n"
    )
    digests = set()
    for hash_seed in ("0", "777"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        digests.add(out.stdout.strip())
    assert len(digests) == 1
    assert run_scenario(load_scenario(scenario, small), 3).history.digest() in digests
