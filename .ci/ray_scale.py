"""A Ray cluster on one multi-GPU host, each node given its own GPU, and a campaign over it.

    python .ci/ray_scale.py --gpus 4 --cores 64 [--kill-after S] -- RUN ARGS...

starts a head node (no GPU: the coordinator's) and one node per GPU (``CUDA_VISIBLE_DEVICES``
of its raylet set to that GPU, ``cores / gpus`` CPUs), runs ``python -m fuzz run --cluster
ADDRESS RUN ARGS...``, optionally removes the last node ``--kill-after`` seconds into the run
(a node lost mid-campaign), and stops the cluster. Exits with the campaign's status.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, required=True)
    ap.add_argument("--cores", type=int, required=True)
    ap.add_argument("--kill-after", type=float, default=None)
    ap.add_argument("run", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    run = [a for a in args.run if a != "--"]
    from ray.cluster_utils import Cluster

    t0 = time.time()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 2,
            "num_gpus": 0,
            "include_dashboard": False,
            "object_store_memory": 2 << 30,
        },
    )
    per_node = max(1, (args.cores - 2) // args.gpus)
    nodes = [
        cluster.add_node(
            num_cpus=per_node,
            num_gpus=1,
            object_store_memory=2 << 30,  # (five raylets on one host share its memory)
            env_vars={"CUDA_VISIBLE_DEVICES": str(i)},
        )
        for i in range(args.gpus)
    ]
    cluster.wait_for_nodes()
    print(f"cluster of {len(nodes)} GPU nodes up in {time.time() - t0:.1f}s", flush=True)
    cmd = [sys.executable, "-m", "fuzz", "run", *run, "--cluster", cluster.address]
    proc = subprocess.Popen(cmd, env=dict(os.environ))
    if args.kill_after is not None:

        def kill() -> None:
            time.sleep(args.kill_after)
            if proc.poll() is None:
                print(f"removing node {nodes[-1].node_id[:12]} (GPU {args.gpus - 1})", flush=True)
                cluster.remove_node(nodes[-1])

        threading.Thread(target=kill, daemon=True).start()
    code = proc.wait()
    cluster.shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())
