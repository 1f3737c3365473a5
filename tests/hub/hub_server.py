"""A stand-in for the Hugging Face hub on 127.0.0.1, for tests of hf::download (nothing real is contacted).

Serves ROOT/ORG/NAME/<commit>/<files> and ROOT/ORG/NAME/refs/<branch> (a commit hash) with the hub's URL
layout and headers:
  HEAD|GET /ORG/NAME/resolve/<revision>/<file>
     small files: 200, ETag = git blob sha1, X-Repo-Commit
     LFS files (*.safetensors, or over 1 KiB): 302 to /lfs/<sha256> on "another host" (localhost when asked
     as 127.0.0.1), X-Linked-Etag = sha256, X-Linked-Size
  GET /lfs/<sha256>: the bytes, with Range support (206 + Content-Range)
  404s carry X-Error-Code RepoNotFound / RevisionNotFound / EntryNotFound, like the hub.
Modes (--mode): normal; drop-once (the first full GET of each LFS blob stops halfway, connection closed);
corrupt (LFS bodies have one byte flipped); no-range (Range is ignored, 200 with everything); 401; 404.
--token T: requests to /ORG/NAME/... need "Authorization: Bearer T" (401 otherwise).
Writes its port to --port-file once listening, a line per request to --log ("METHOD PATH RANGE AUTH"), and
the etags it serves to --manifest (computed with hashlib: the tests' oracle). Exits after --lifetime seconds.
"""
import argparse
import hashlib
import http.server
import json
import os
import socket
import threading
import urllib.parse

LFS_THRESHOLD = 1024


def git_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def is_lfs(path, data):
    return path.endswith(".safetensors") or len(data) > LFS_THRESHOLD


class Hub:
    def __init__(self, root, mode, token, log):
        self.root, self.mode, self.token, self.log_path = root, mode, token, log
        self.lock = threading.Lock()
        self.dropped = set()
        self.blobs = {}  # sha256 -> path of the content

    def manifest(self):
        """{repo: {commit: {file: etag}}} for every file under the root."""
        out = {}
        for org in sorted(os.listdir(self.root)):
            if not os.path.isdir(os.path.join(self.root, org)):
                continue
            for name in sorted(os.listdir(os.path.join(self.root, org))):
                repo_dir = os.path.join(self.root, org, name)
                for commit in sorted(os.listdir(repo_dir)):
                    if commit == "refs":
                        continue
                    base = os.path.join(repo_dir, commit)
                    for dirpath, _, files in os.walk(base):
                        for f in files:
                            full = os.path.join(dirpath, f)
                            rel = os.path.relpath(full, base)
                            with open(full, "rb") as fh:
                                data = fh.read()
                            if is_lfs(rel, data):
                                etag = hashlib.sha256(data).hexdigest()
                                self.blobs[etag] = full
                            else:
                                etag = git_sha1(data)
                            out.setdefault(f"{org}/{name}", {}).setdefault(commit, {})[rel] = etag
        return out

    def log(self, line):
        with self.lock:
            with open(self.log_path, "a") as f:
                f.write(line + "\n")


class Handler(http.server.BaseHTTPRequestHandler):
    hub = None

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self.handle_request(head=True)

    def do_GET(self):
        self.handle_request(head=False)

    def reply(self, status, headers=(), body=b"", head=False):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        if not any(k.lower() == "content-length" for k, _ in headers):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head and body:
            self.wfile.write(body)

    def error(self, status, code, message, head):
        self.reply(status, [("X-Error-Code", code), ("X-Error-Message", message)], message.encode(), head)

    def handle_request(self, head):
        hub = self.hub
        path = urllib.parse.unquote(urllib.parse.urlparse(self.path).path)
        rng = self.headers.get("Range", "-")
        auth = "auth" if self.headers.get("Authorization") else "-"
        hub.log(f"{'HEAD' if head else 'GET'} {path} {rng} {auth}")
        if path.startswith("/lfs/"):
            return self.serve_blob(path[5:], rng, head)
        if hub.mode == "401":
            return self.error(401, "", "Invalid credentials in Authorization header", head)
        if hub.mode == "404":
            return self.error(404, "RepoNotFound", "Repository not found", head)
        if hub.token and self.headers.get("Authorization") != f"Bearer {hub.token}":
            return self.error(401, "", "Invalid credentials in Authorization header", head)
        parts = path.strip("/").split("/")
        if len(parts) < 5 or parts[2] != "resolve":
            return self.error(404, "RepoNotFound", "Repository not found", head)
        org, name, revision, rel = parts[0], parts[1], parts[3], "/".join(parts[4:])
        repo_dir = os.path.join(hub.root, org, name)
        if not os.path.isdir(repo_dir):
            return self.error(404, "RepoNotFound", "Repository not found", head)
        commit = revision
        if not os.path.isdir(os.path.join(repo_dir, revision)):
            ref = os.path.join(repo_dir, "refs", revision)
            if not os.path.isfile(ref):
                return self.error(404, "RevisionNotFound", f"Invalid rev id: {revision}", head)
            commit = open(ref).read().strip()
        full = os.path.join(repo_dir, commit, rel)
        if not os.path.isfile(full):
            return self.error(404, "EntryNotFound", f"{rel} does not exist on \"{revision}\"", head)
        with open(full, "rb") as f:
            data = f.read()
        if is_lfs(rel, data):
            sha = hashlib.sha256(data).hexdigest()
            hub.blobs[sha] = full
            # The storage is "another host", as the hub's CDN is: localhost for 127.0.0.1 and back.
            host, port = self.headers.get("Host").rsplit(":", 1)
            storage = "localhost" if host == "127.0.0.1" else "127.0.0.1"
            return self.reply(302, [("Location", f"http://{storage}:{port}/lfs/{sha}"), ("X-Repo-Commit", commit),
                                    ("X-Linked-Etag", f'"{sha}"'), ("X-Linked-Size", str(len(data))),
                                    ("ETag", '"pointer-etag"'), ("Content-Length", "0")], b"", head)
        return self.reply(200, [("X-Repo-Commit", commit), ("ETag", f'"{git_sha1(data)}"')], data, head)

    def serve_blob(self, sha, rng, head):
        hub = self.hub
        if sha not in hub.blobs:
            return self.error(404, "", "no such blob", head)
        with open(hub.blobs[sha], "rb") as f:
            data = f.read()
        if hub.mode == "corrupt":
            data = data[:-1] + bytes([data[-1] ^ 0x01])
        start = 0
        if rng != "-" and hub.mode != "no-range":
            start = int(rng.split("=")[1].split("-")[0])
            if start >= len(data):
                return self.reply(416, [("Content-Range", f"bytes */{len(data)}")], b"", head)
        body = data[start:]
        headers = [("Content-Length", str(len(body))), ("ETag", f'"{sha}"'), ("Accept-Ranges", "bytes")]
        status = 200
        if start > 0:
            status = 206
            headers.append(("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}"))
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if head:
            return
        with hub.lock:
            drop = hub.mode == "drop-once" and start == 0 and sha not in hub.dropped
            if drop:
                hub.dropped.add(sha)
        if drop:
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        self.wfile.write(body)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--mode", default="normal", choices=["normal", "drop-once", "corrupt", "no-range", "401", "404"])
    ap.add_argument("--token", default="")
    ap.add_argument("--lifetime", type=float, default=120)
    a = ap.parse_args()
    hub = Hub(a.root, a.mode, a.token, a.log)
    with open(a.manifest + ".tmp", "w") as f:
        json.dump(hub.manifest(), f)
    os.replace(a.manifest + ".tmp", a.manifest)
    Handler.hub = hub
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Timer(a.lifetime, server.shutdown).start()
    with open(a.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(a.port_file + ".tmp", a.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
