#!/usr/bin/env python3
# peers.py: `python3 -m stridebench peers` (scripts/stridebench/__main__.py), which runs under a
# Python that has what the tool needs. Its child processes run this file too.
import sys

from stridebench.__main__ import main

if __name__ == "__main__":
    sys.exit(main(["peers", *sys.argv[1:]]))
