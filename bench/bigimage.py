#!/usr/bin/python3
"""The benchmarks' test image: four gzip layers, ~126 MB compressed / ~322 MB uncompressed
(the busybox-static rootfs of tests/fixtures, then /usr/share/doc, /usr/lib/python3*, and
parts of /usr/lib/x86_64-linux-gnu copied from this machine). Used by bench/import and
bench/pull; builds nothing that is already there.

    bench/bigimage.py WORK PROBE [--tars] [--second]

  WORK/layout    the image as an OCI layout (ref `latest`)
  WORK/tars/     with --tars: each layer's tar, decompressed (for `tar -xf`)
  WORK/layout2   with --second: the same four layers plus one small fifth layer (ref
                 `latest`): an image that shares all but one small layer with the first
Layer blobs are reproducible (gzip without a timestamp), so the shared layers of the two
layouts have the same digests.
"""
import argparse
import io
import os
import random
import sys
import tarfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "fixtures"))
import oci  # noqa: E402


def tar_of(paths):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for p in paths:
            if os.path.exists(p):
                t.add(p, arcname=p.lstrip("/"))
    return buf.getvalue()


def layers(work, probe):
    base = oci.Layer(oci.busybox_layers(work, probe)[0].entries, "gzip")
    return [oci.Layer(None, "gzip", raw=base.tar()),
            oci.Layer(None, "gzip", raw=tar_of(["/usr/share/doc"])),
            oci.Layer(None, "gzip", raw=tar_of(["/usr/lib/python3", "/usr/lib/python3.11"])),
            oci.Layer(None, "gzip", raw=tar_of(["/usr/lib/x86_64-linux-gnu/perl",
                                                "/usr/lib/x86_64-linux-gnu/dri",
                                                "/usr/lib/x86_64-linux-gnu/gconv",
                                                "/usr/lib/x86_64-linux-gnu/libicudata.so.72.1"]))]


def small_layer():
    """1 MB of files that do not compress (the same bytes on every run), as an application
    layer on top of a base would be."""
    rng = random.Random(14)
    entries = [oci.directory("app")]
    for i in range(16):
        entries.append(oci.file(f"app/part{i:02d}", rng.randbytes(64 << 10)))
    return oci.Layer(entries, "gzip")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work")
    ap.add_argument("probe")
    ap.add_argument("--tars", action="store_true")
    ap.add_argument("--second", action="store_true")
    a = ap.parse_args()
    want_tars = a.tars and not os.path.exists(os.path.join(a.work, "tars", "done"))
    want_second = a.second and not os.path.exists(os.path.join(a.work, "layout2", "index.json"))
    if os.path.exists(os.path.join(a.work, "layout", "index.json")) and not (want_tars or
                                                                            want_second):
        return 0
    ls = layers(a.work, a.probe)
    if not os.path.exists(os.path.join(a.work, "layout", "index.json")):
        oci.write_layout(os.path.join(a.work, "layout"), ls)
    if want_tars:
        os.makedirs(os.path.join(a.work, "tars"), exist_ok=True)
        for i, layer in enumerate(ls):
            with open(os.path.join(a.work, "tars", f"layer{i}.tar"), "wb") as f:
                f.write(layer.tar())
        open(os.path.join(a.work, "tars", "done"), "w").close()
    if want_second:
        oci.write_layout(os.path.join(a.work, "layout2"), ls + [small_layer()])
    return 0


if __name__ == "__main__":
    sys.exit(main())
