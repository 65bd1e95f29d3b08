"""This process's memory as the kernel counts it: the fields of ``/proc/self/status``."""

from __future__ import annotations

MIB = 1 << 20


def status() -> dict:
    """Every field of ``/proc/self/status`` given in kB (``VmRSS``, ``VmHWM``: the exact peak of
    the resident set, ``RssAnon``, ``RssFile``, ...), in bytes."""
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            parts = value.split()
            if len(parts) == 2 and parts[1] == "kB":
                fields[key] = int(parts[0]) * 1024
    return fields
