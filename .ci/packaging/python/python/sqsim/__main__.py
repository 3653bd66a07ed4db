"""`python -m sqsim ARGS`: runs the server binary with ARGS, as the `sqsim` command does."""

import os
import subprocess
import sys

from ._server import binary


def main():
    path = binary()
    if os.name == "posix":
        os.execv(path, [path, *sys.argv[1:]])
    sys.exit(subprocess.call([path, *sys.argv[1:]]))


if __name__ == "__main__":
    main()
