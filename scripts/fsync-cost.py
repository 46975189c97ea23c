#!/usr/bin/env python3
"""What making a request's buckets durable costs on this machine's disk.

Per "request": a 120 KiB pwrite to each of four files (a 4-bucket
ProduceLog of the Flink benchmark), then the sync under test:
  none       no sync (the writeback is left to the kernel's flusher)
  fdatasync  one fdatasync per file (Fjord before 3cb7ab4)
  syncfs     one syncfs for all four (Fjord's sync_together since 3cb7ab4)
Prints, per request, the process's CPU and the whole machine's busy CPU
(/proc/stat, 10 ms ticks: run it on a quiet machine, 1000+ requests).

Usage: scripts/fsync-cost.py DIR [REQUESTS (1000)] [ROUNDS (4)]
Runs the three modes alternately ROUNDS times; DIR is on the disk to test
and its files are removed at the end.
"""
import ctypes
import os
import resource
import sys
import time

CHUNK = 120 * 1024
FILES = 4
libc = ctypes.CDLL("libc.so.6", use_errno=True)


def busy_ticks():
    v = list(map(int, open("/proc/stat").readline().split()[1:]))
    return sum(v) - v[3] - v[4]  # all but idle and iowait


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run(directory, mode, requests):
    paths = [os.path.join(directory, f"fsync-cost-{mode}-{i}") for i in range(FILES)]
    fds = [os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644) for p in paths]
    buf = os.urandom(CHUNK)
    os.sync()
    time.sleep(0.5)
    b0, c0 = busy_ticks(), cpu_s()
    for i in range(requests):
        for fd in fds:
            os.pwrite(fd, buf, i * CHUNK)
        if mode == "fdatasync":
            for fd in fds:
                os.fdatasync(fd)
        elif mode == "syncfs":
            if libc.syncfs(fds[0]) != 0:
                raise OSError(ctypes.get_errno(), "syncfs failed")
    c1 = cpu_s()
    if mode == "none":
        os.sync()  # the writeback the other modes paid for, on the machine
    b1 = busy_ticks()
    for fd, p in zip(fds, paths):
        os.close(fd)
        os.unlink(p)
    tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
    print(f"{mode:9} process {(c1 - c0) / requests * 1e6:6.0f} us, "
          f"machine {(b1 - b0) * tick_us / requests:6.0f} us per request")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    directory = sys.argv[1]
    requests = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    for _ in range(rounds):
        for mode in ("none", "fdatasync", "syncfs"):
            run(directory, mode, requests)


if __name__ == "__main__":
    main()
