#!/usr/bin/env python3
"""A resident HTTP client for bench/sync/run.

The agents are driven by tenbind, a resident process with kept-alive
connections; a harness that starts curl for every request times curl's
start as well (~8 ms here, twice in each timed publish + pull).  This
client is started before the timed phases, in the network namespace of
the agent it talks to, and answers one request per input line:

    METHOD URL OUT_FILE [BODY]        (BODY: the rest of the line)

It writes the answer's body to OUT_FILE, then prints the status code on
a line of its own (000 when no answer came).  The bearer token is its
only argument.  A connection the agent closed between two requests is
opened again once; a request that failed after it was sent goes again
only when it may be repeated (GET, PUT).
"""
import http.client
import sys
import urllib.parse


def main():
    token = sys.argv[1]
    conns = {}
    for line in sys.stdin:
        parts = line.rstrip("\n").split(" ", 3)
        if len(parts) < 3:
            print("000", flush=True)
            continue
        method, url, out = parts[0], parts[1], parts[2]
        body = parts[3].encode() if len(parts) == 4 else None
        u = urllib.parse.urlsplit(url)
        path = u.path + ("?" + u.query if u.query else "")
        headers = {"Authorization": "Bearer " + token}
        if body is not None:
            headers["Content-Type"] = "application/json"
        code = "000"
        for attempt in (1, 2):
            conn = conns.get(u.netloc)
            reused = conn is not None
            if conn is None:
                conn = conns[u.netloc] = http.client.HTTPConnection(
                    u.netloc, timeout=600)
            try:
                conn.request(method, path, body=body, headers=headers)
            except (ConnectionError, http.client.HTTPException, OSError):
                conn.close()
                del conns[u.netloc]
                if reused and attempt == 1:
                    continue
                break
            try:
                r = conn.getresponse()
                data = r.read()
            except (ConnectionError, http.client.HTTPException, OSError):
                conn.close()
                del conns[u.netloc]
                if reused and attempt == 1 and method in ("GET", "PUT"):
                    continue
                break
            with open(out, "wb") as f:
                f.write(data)
            code = "%03d" % r.status
            break
        print(code, flush=True)


if __name__ == "__main__":
    main()
