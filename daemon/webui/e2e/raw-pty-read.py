#!/usr/bin/env python3
"""raw-pty-read.py FILE — the baseline of e2e/bench-cat.mjs: `cat FILE` on a
fresh PTY whose other end this process reads, 64 KiB at a time, and discards
as fast as it can (what internal/termbench.RawPTYRead does in Go). Prints
one JSON line: {"bytes": N, "seconds": S}, S from just before cat is
started to the read that finds the PTY closed (EIO) after cat exited.
Standard library only; the PTY is 24x80 like termbench's."""
import fcntl
import json
import os
import struct
import subprocess
import sys
import termios
import time


def main():
    path = sys.argv[1]
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack('HHHH', 24, 80, 0, 0))
    start = time.perf_counter()
    proc = subprocess.Popen(['cat', path], stdin=slave, stdout=slave, stderr=slave,
                            start_new_session=True, close_fds=True)
    os.close(slave)  # the PTY closes (EIO) once cat, its only holder, exits
    n = 0
    while True:
        try:
            b = os.read(master, 65536)
        except OSError:  # EIO: every holder of the slave side is gone
            break
        if not b:
            break
        n += len(b)
    seconds = time.perf_counter() - start
    proc.wait(timeout=10)
    os.close(master)
    print(json.dumps({'bytes': n, 'seconds': seconds}))


if __name__ == '__main__':
    main()
