#!/usr/bin/env python3
# peers.py: the command line of stridebench.peers (scripts/stridebench/peers.py says what
# it does); its child processes run this file too.
import sys

from stridebench.peers import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
