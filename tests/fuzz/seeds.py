#!/usr/bin/python3
"""Write the seed corpus of every fuzz target into tests/fuzz/corpus/<target>/, from the
suite's own fixtures (tests/fixtures/oci.py's layers and hostile images) and the reference's
examples. Deterministic: re-running it rewrites the same files. Crash inputs found by the
fuzzers live beside the seeds as crash-*, and are replayed by every run."""
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "fixtures"))
import oci  # noqa: E402

corpus = os.path.join(here, "corpus")


def put(target, name, data):
    d = os.path.join(corpus, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def j(v, **kw):
    return json.dumps(v, **kw)


def settings():
    put("settings", "deny", j({"permissions": {"allow": ["Bash(ls:*)"], "deny": [
        "Bash(curl:*)", "WebFetch", "Read(~/.ssh/**)", "Bash(rm -rf:*)"]}}, indent=2))
    put("settings", "hooks-loopback", j({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "http", "url": "http://127.0.0.1:8080/{profile}/hook"},
        {"type": "http", "url": "http://localhost:9/x"},
        {"type": "command", "command": "~/.claude-profiles/{profile}/hooks/pre.sh"}]}]},
        "statusLine": {"type": "command", "command": "statusline.sh"}}))
    put("settings", "unicode", '{"a": "\\ud800\\udc00 \u00e9", "b": [1.5e300, -0, NaN, '
        'Infinity], "a": {"permissions": null}, "permissions": {"deny": ["WebSearch", 1]}}')
    put("settings", "nested", "[" * 50 + "]" * 50)
    put("settings", "not-object", '"text"')


def env():
    put("env", "dotenv", "# comment\nANTHROPIC_API_KEY=sk-x\nexport A = 'quoted'\n"
        'B="double"\r\nC=x=y\n\n=novalue\nD\nA=again\n\x1cE=sep\n')
    put("env", "forward", " A, ,B ,,\tC_D ")
    put("env", "envfile", "A=1\nB=x=y\r\n# c\n  \t\n1X=2\n")


def claude_json():
    put("claude_json", "servers", j({
        "mcpServers": {"fs": {"command": "npx", "args": ["-y", "server-fs"]}},
        "enabledMcpjsonServers": ["a", "b"], "enableAllProjectMcpServers": True,
        "projects": {"/home/u/src": {"mcpServers": {"db": {"type": "http",
                                                           "url": "http://x"}},
                                      "enabledMcpjsonServers": ["c"],
                                      "enableAllProjectMcpServers": True}}}))
    put("claude_json", "crash-tab-in-names", j({"mcpServers": {"a\tb": {"command": "x"}},
                                        "projects": {"/p\t/q": {"mcpServers": {"s": {}}}}}))


def oci_docs(tmp):
    layers = [oci.Layer([oci.file("etc/motd", "x\n")], "gzip"),
              oci.Layer([oci.file("etc/x", "y\n")], "zstd")]
    lay = os.path.join(tmp, "layout")
    info = oci.write_layout(lay, layers)
    blobs = os.path.join(lay, "blobs", "sha256")
    with open(os.path.join(lay, "index.json"), "rb") as f:
        put("oci", "index", f.read())
    for name, d in (("manifest", info["manifest"]), ("config", info["config"])):
        with open(os.path.join(blobs, d[7:]), "rb") as f:
            put("oci", name, f.read())
    put("oci", "docker-manifest", j([{"Config": "cfg.json", "RepoTags": ["busybox:fixture"],
                                       "Layers": ["l1/layer.tar", "l2/layer.tar"]}]))
    h = "sha256:" + hashlib.sha256(b"x").hexdigest()
    put("oci", "manifest-list", j({
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.list.v2+json",
        "manifests": [{"mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                       "digest": h, "size": 10, "platform": {
                           "architecture": a, "os": "linux", "variant": v}}
                      for a, v in (("arm", "v7"), ("arm64", "v8"), ("amd64", ""))]}))
    put("oci", "platform", "linux/arm64/v8")
    put("oci", "media-type", "application/vnd.oci.image.layer.v1.tar+zstd")
    return lay


def seccomp():
    with open("/usr/share/containers/seccomp.json", "rb") as f:
        put("seccomp", "containers-default", f.read())
    put("seccomp", "small", j({"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 1,
                                "architectures": ["SCMP_ARCH_X86_64"], "syscalls": [
                                    {"names": ["read", "write", "exit_group"],
                                     "action": "SCMP_ACT_ALLOW"},
                                    {"names": ["personality"], "action": "SCMP_ACT_ALLOW",
                                     "args": [{"index": 0, "value": 8, "op": "SCMP_CMP_EQ"}]},
                                    {"names": ["clone"], "action": "SCMP_ACT_ALLOW",
                                     "args": [{"index": 0, "value": 2114060288,
                                               "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}],
                                     "excludes": {"caps": ["CAP_SYS_ADMIN"]}}]}))


def registry():
    for i, r in enumerate(["debian:12", "docker.io/library/debian:12",
                           "localhost:5000/a/b@sha256:" + "a" * 64,
                           "registry.test:5000/o/r:v1@sha256:" + "0" * 64, "registry.test:443/x"]):
        put("registry", "ref-%d" % i, r)
    put("registry", "challenge", 'Bearer realm="https://auth.test/token",service="registry.test",'
        'scope="repository:library/debian:pull",error="in\\"valid"')
    put("registry", "auth", j({"auths": {
        "registry.test": {"auth": "dXNlcjpwYXNz"},
        "https://registry.test/v1/": {"auth": "dTpw"},
        "registry.test/library": {"auth": "YTpiOmM="}}, "credHelpers": {"x": "y"}}))


def registries_conf():
    put("registries_conf", "search", "unqualified-search-registries = ['a.example', "
        "\"docker.io\",]\nshort-name-mode = \"permissive\" # c\n")
    put("registries_conf", "aliases", "[aliases]\n  \"debian\" = \"docker.io/library/debian\"\n"
        "  'x/y' = 'q.example/x/y'\n")
    put("registries_conf", "registries", "[[registry]]\nprefix = 'q.example/team'\n"
        "location = 'internal.corp/q'\nmirror-by-digest-only = true\ninsecure = false\n"
        "[[registry.mirror]]\nlocation = 'm.corp:5000/q'\npull-from-mirror = \"digest-only\"\n"
        "[[registry]]\nlocation = 'docker.io'\n[[registry.mirror]]\nlocation = 'hub.corp'\n"
        "[[registry]]\nprefix = '*.dev.example'\nblocked = true\n")
    put("registries_conf", "v1", "[registries.search]\nregistries = ['one.example']\n"
        "[registries.insecure]\nregistries = ['plain.example:5000']\n"
        "[registries.block]\nregistries = ['no.example']\n")
    put("registries_conf", "escapes", "a.\"b\".c = \"\\u00e9\\t\\\"\"\nn = -1_000\n[x]\n")


def git_config():
    put("git_config", "clone", "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n"
        "\tbare = false\n\tlogallrefupdates = true\n[remote \"origin\"]\n"
        "\turl = https://example.test/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
        "[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n")
    put("git_config", "armed", "# c\n[core] fsmonitor = \"touch x\" ; y\n[alias]\n"
        "\tst = !sh -c 'a \\\n b'\n[includeIf \"gitdir:/x/\"]\n\tpath = p\n")
    put("git_config", "tricks", b"\xef\xbb\xbf[Core]\r\n\tbare = false # \\\n\tfsmonitor = x\n"
        b"[remote.O]\nurl\n[remote \"a\\\"\x00b\"] url = \"q;#\\t\" ; c\n[x]y=\"z\\\r\n\"\n")


def layer_seeds():
    L = oci.Layer
    seeds = {
        "plain": L([oci.directory("etc"), oci.file("etc/motd", "motd\n"),
                    oci.symlink("etc/l", "motd"), oci.hardlink("etc/h", "etc/motd"),
                    oci.fifo("etc/fifo"), oci.chardev("dev-null")], "none"),
        "gzip": L([oci.directory("opt/a"), oci.opaque("opt/a"), oci.file("opt/a/new", "n"),
                   oci.whiteout("var/cache"), oci.file("srv/tool", "#!", 0o4755)], "gzip"),
        "zstd": L([oci.directory("srv/ro", 0o555), oci.file("srv/data", "s", 0o600, 33, 33),
                   oci.hardlink("srv/hl", "srv/data")], "zstd"),
        "long-name": L([oci.file("d/" + "n" * 200 + "/" + "m" * 120, "x")], "none"),
        "symlink-escape": L([oci.symlink("link", "/tmp"), oci.file("link/pwned", "x")], "none"),
        "dotdot": L([oci.file("../../pwned", "x"), oci.hardlink("hl", "../../etc/passwd"),
                     oci.file("etc/../../.wh.x", "")], "none"),
    }
    for name, layer in seeds.items():
        put("layer", name, layer.blob())
    put("layer", "name-escapes", "etc/./a//b/../c\x01\x7f\xff")


def containerfile():
    put("containerfile", "reference", "# syntax=docker/dockerfile:1\n"
        "ARG FEDORA_DIGEST=sha256:" + "0" * 64 + "\n"
        "FROM registry.example/fedora:44@${FEDORA_DIGEST}\n"
        "RUN dnf install -y \\\n    git \\\n  # tools\n\n    ripgrep \\\n  && dnf clean all\n"
        "RUN useradd -m -u 1000 -U appuser\nUSER appuser\n"
        'ENV PATH="/home/appuser/.local/bin:$PATH"\n'
        "COPY --chmod=0755 entrypoint.sh /entrypoint.sh\n"
        'ENTRYPOINT ["/entrypoint.sh"]\nCMD ["claude"]\nUSER root\n')
    put("containerfile", "stages", "FROM --platform=linux/arm64 registry.example/gcc AS build\n"
        "WORKDIR /src\nCOPY . .\nRUN make\nFROM scratch\n"
        "COPY --from=build --chown=1000:1000 --link /src/a /src/b /out/\n"
        'ADD ["a b", "/c d/"]\nVOLUME ["/data"]\nEXPOSE 80/tcp 443\nSTOPSIGNAL SIGTERM\n'
        'SHELL ["/bin/bash", "-c"]\nMAINTAINER someone\n')
    put("containerfile", "escape", "# escape=`\n\nFROM registry.example/win\n"
        "RUN dir c:\\ `\n  /w\nCOPY a\\b c:\\dest\\\n"
        "ENV A=1 B=\"two words\" C='$A x' D=x`$y\nenv LEGACY v w\n"
        "LABEL k=\"${A:-${B:+z}}\"\nARG X Y=2\nUSER ${X:-root}\n")
    put("containerfile", "refused", "FROM a\nRUN cat <<EOF\nx\nEOF\nONBUILD RUN x\n"
        "HEALTHCHECK CMD true\nRUN --mount=type=cache,target=/c x\nFOO bar\n")


def ignore():
    put("ignore", "reference", "# comment\n*.md\n!README.md\n**/node_modules\n/build/\n"
        "docs/**/*.tmp\n[a-c]?.txt\n\\*literal\n  ! spaced \n.git\n")
    put("ignore", "malformed", "\ufeff[a\n[]\na[b-]\n!\n***/x**y\n../../etc\n")


def client_hello(name, ech=False):
    """A TLS 1.3 ClientHello as clients send it (fixed random and key share)."""
    import struct
    ext = b""
    if name is not None:
        n = name.encode()
        ext += struct.pack("!HHHBH", 0, len(n) + 5, len(n) + 3, 0, len(n)) + n
    ext += struct.pack("!HH", 0x2b, 3) + b"\x02\x03\x04"             # supported_versions
    ext += struct.pack("!HHH", 0x0a, 4, 2) + b"\x00\x1d"              # supported_groups
    ext += struct.pack("!HHHHH", 0x33, 38, 36, 0x1d, 32) + bytes(range(32))  # key_share
    if ech:
        ext += struct.pack("!HH", 0xfe0d, 4) + b"\x00\x01\x00\x01"
    body = b"\x03\x03" + bytes(32) + b"\x20" + bytes(range(32)) + \
        b"\x00\x02\x13\x01" + b"\x01\x00" + struct.pack("!H", len(ext)) + ext
    hs = b"\x01" + struct.pack("!I", len(body))[1:] + body
    return b"\x16\x03\x01" + struct.pack("!H", len(hs)) + hs


def dns_query(name, qtype, edns=False):
    import struct
    q = b"".join(bytes([len(x)]) + x.encode() for x in name.split(".")) + b"\x00"
    msg = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 1 if edns else 0) + q + \
        struct.pack("!HH", qtype, 1)
    if edns:
        msg += b"\x00" + struct.pack("!HHIH", 41, 1232, 0, 0)
    return msg


def egress():
    put("egress_first", "tls-sni", client_hello("api.example.com"))
    put("egress_first", "tls-no-sni", client_hello(None))
    put("egress_first", "tls-ech", client_hello("public.example", ech=True))
    put("egress_first", "proxy-connect",
        "CONNECT a.example.com:443 HTTP/1.1\r\nHost: a.example.com:443\r\n\r\n")
    put("egress_first", "proxy-absolute",
        "GET http://b.example.com:8080/x?y HTTP/1.1\r\nHost: b.example.com\r\n\r\n")
    put("egress_first", "http", "GET /x HTTP/1.1\r\nUser-Agent: t\r\nHost: Example.COM:8080\r\n"
        "Accept: */*\r\n\r\n")
    put("egress_first", "http-two-hosts", "POST / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n")
    put("egress_dns", "a", dns_query("api.example.com", 1))
    put("egress_dns", "aaaa-edns", dns_query("ok.v6.csandbox.test", 28, edns=True))
    put("egress_dns", "txt", dns_query("data.exfil.example", 16))
    # egress_http: the first byte is the size of the pieces the rest arrives in
    put("egress_http", "pipelined", "\x07GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"
        "GET http://b.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n")
    put("egress_http", "length", "\x05POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 9\r\n\r\n"
        "GET / HTTCONNECT b.test:443 HTTP/1.1\r\n\r\n")
    put("egress_http", "chunked", "\x03POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        "1a;ext=1\r\nGET / HTTP/1.1\r\nHost: b\r\n\r\n\r\n0\r\nX-Trailer: t\r\n\r\n"
        "GET / HTTP/1.1\r\nHost: c.test\r\n\r\n")
    put("egress_http", "te-and-length", "\x40POST / HTTP/1.1\r\nContent-Length: 4\r\n"
        "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    put("egress_http", "folded", "\x01GET / HTTP/1.1\r\nHost: a.test\r\n b.test\r\n\r\n")
    put("egress_http", "upgrade", "\x10GET / HTTP/1.1\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\n\r\nGET http://c.test/ HTTP/1.1\r\n\r\n")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        settings()
        env()
        claude_json()
        oci_docs(tmp)
        seccomp()
        registry()
        registries_conf()
        git_config()
        layer_seeds()
        containerfile()
        ignore()
        egress()


if __name__ == "__main__":
    main()
