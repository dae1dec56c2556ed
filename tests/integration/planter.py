"""The attacker of the launch-race tests, run as its own process beside the launches: what a
sandboxed session can do to the tree it sees while the user starts a second session.

    planter.py STOPFILE COUNTFILE PATH=TARGET...

For each PATH (a directory, file or symlink inside the work tree or the profile), a symlink
PATH.planted -> TARGET (a host directory) is made; then, until STOPFILE exists, each PATH in turn is swapped
with its symlink by renameat2(RENAME_EXCHANGE) and swapped back a moment later, so at any
instant a path may be the real thing or a link to TARGET. Every PATH is back in place when
it exits; the number of swaps made goes to COUNTFILE."""
import ctypes
import os
import random
import sys
import time

RENAME_EXCHANGE = 2
AT_FDCWD = -100

libc = ctypes.CDLL(None, use_errno=True)
libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                           ctypes.c_uint]


def exchange(a, b):
    return libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), RENAME_EXCHANGE) == 0


def main():
    stop, countfile = sys.argv[1], sys.argv[2]
    pairs = [a.split("=", 1) for a in sys.argv[3:]]
    paths = [p for p, _ in pairs]
    for p, target in pairs:
        os.symlink(target, p + ".planted")
    swaps = 0
    while not os.path.exists(stop):
        for p in paths:
            if exchange(p, p + ".planted"):
                swaps += 1
                time.sleep(random.random() * 0.001)
                # Back, whatever happened meanwhile: the tree must end as it began.
                while not exchange(p, p + ".planted"):
                    time.sleep(0.0001)
            time.sleep(random.random() * 0.0005)
    for p in paths:
        os.unlink(p + ".planted")
    with open(countfile, "w") as f:
        f.write(str(swaps))


if __name__ == "__main__":
    main()
