#!/usr/bin/env python3
"""Unpacks .deb files into a prefix folder (never into /), with dpkg -x when present, else by
reading the ar archive and its data.tar.* with Python's tarfile (the GPU machine may lack dpkg).

Usage: unpack_debs.py PREFIX DEB...
"""
import io
import os
import shutil
import subprocess
import sys
import tarfile


def ar_members(path):
    with open(path, "rb") as f:
        if f.read(8) != b"!<arch>\n":
            raise ValueError(f"{path}: not an ar archive")
        while True:
            header = f.read(60)
            if len(header) < 60:
                return
            name = header[:16].decode().strip().rstrip("/")
            size = int(header[48:58].decode().strip())
            data = f.read(size)
            if size % 2:
                f.read(1)
            yield name, data


def unpack(deb, prefix):
    if shutil.which("dpkg"):
        subprocess.run(["dpkg", "-x", deb, prefix], check=True)
        return
    for name, data in ar_members(deb):
        if name.startswith("data.tar"):
            mode = {"data.tar.xz": "r:xz", "data.tar.gz": "r:gz", "data.tar": "r:"}.get(name)
            if mode is None:
                raise ValueError(f"{deb}: {name} not supported without dpkg")
            with tarfile.open(fileobj=io.BytesIO(data), mode=mode) as t:
                t.extractall(prefix)
            return
    raise ValueError(f"{deb}: no data.tar member")


def main():
    prefix = os.path.abspath(sys.argv[1])
    if prefix == "/":
        sys.exit("refusing to unpack into /")
    os.makedirs(prefix, exist_ok=True)
    for deb in sys.argv[2:]:
        unpack(deb, prefix)
        print("unpacked", os.path.basename(deb))


if __name__ == "__main__":
    main()
