"""A local HTTP server for the staging tests: HEAD and GET with Range, Cloud Storage's hashes."""

import base64
import contextlib
import hashlib
import http.server
import threading
from typing import Dict, List, Optional


class Files:
    """What the server serves: path -> bytes, and the MD5 it announces (default: the true one)."""

    def __init__(self, files: Dict[str, bytes], announced_md5: Optional[Dict[str, str]] = None,
                 hashes: bool = True):
        self.files, self.announced_md5, self.hashes = files, announced_md5 or {}, hashes
        self.requests: List[str] = []   # "HEAD /path" or "GET /path"
        self.ranges: List[int] = []     # start offsets of Range requests


def _handler(served: Files):
    class Handler(http.server.BaseHTTPRequestHandler):
        def _headers(self, status: int, body: bytes, path: str) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            if served.hashes:
                # Cloud Storage sends the whole object's hashes, base64, also on Range requests.
                payload = served.files[path]
                md5 = served.announced_md5.get(path) or hashlib.md5(payload).hexdigest()
                self.send_header("x-goog-hash", "crc32c=AAAAAA==")
                self.send_header("x-goog-hash",
                                 "md5=" + base64.b64encode(bytes.fromhex(md5)).decode())
            self.end_headers()

        def _serve(self, method: str) -> Optional[bytes]:
            served.requests.append(f"{method} {self.path}")
            if self.path not in served.files:
                self.send_error(404)
                return None
            payload = served.files[self.path]
            start, header = 0, self.headers.get("Range")
            if header:
                start = int(header.split("=")[1].split("-")[0])
                served.ranges.append(start)
            body = payload[start:]
            self._headers(206 if header else 200, payload if method == "HEAD" else body,
                          self.path)
            return body

        def do_HEAD(self):  # noqa: N802
            self._serve("HEAD")

        def do_GET(self):  # noqa: N802
            body = self._serve("GET")
            if body is not None:
                self.wfile.write(body)

        def log_message(self, *args):
            pass

    return Handler


@contextlib.contextmanager
def serving(served: Files):
    """Yields the base URL, http://127.0.0.1:<port>."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(served))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}"
    finally:
        httpd.shutdown()
        httpd.server_close()
