"""``python -m chronoq worker module:attr``: runs a worker until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from typing import List, Optional

from .aio import AsyncWorker
from .errors import ChronoqError
from .worker import Worker, load_worker


def main(argv: Optional[List[str]] = None) -> int:
    """The command line; returns the exit status (0 after a graceful stop, 1
    when the worker stopped on an error, 2 for a bad command line)."""
    parser = argparse.ArgumentParser(prog="python -m chronoq")
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser(
        "worker",
        help="run a worker",
        description="Imports module:attr (a chronoq.Worker or AsyncWorker, or a function "
        "returning one) and runs it until SIGTERM or SIGINT, which stop it gracefully: "
        "running tasks finish and their outcomes are sent.",
    )
    w.add_argument("target", help="module:attr, e.g. myapp.tasks:worker")
    w.add_argument("--log-level", default=os.environ.get("CHRONOQ_LOG_LEVEL", "INFO"))
    w.add_argument(
        "--flush-timeout", type=float, default=30.0,
        help="seconds to keep trying to send the last outcomes at the end (default 30)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        worker = load_worker(args.target)
    except (ImportError, AttributeError, TypeError, ValueError) as e:
        print(f"error: {args.target}: {e}", file=sys.stderr)
        return 2
    try:
        if isinstance(worker, AsyncWorker):
            asyncio.run(worker.run(flush_timeout=args.flush_timeout))
        else:
            assert isinstance(worker, Worker)
            worker.run(flush_timeout=args.flush_timeout)
    except ChronoqError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
