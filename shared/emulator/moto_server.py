# Single-threaded moto server for strand's emulator-backed tests.
#
# moto's own `moto_server` serves requests on threads, and its conditional
# writes (S3 If-None-Match, DynamoDB ConditionExpression) are check-then-act
# without a lock, so two concurrent writers can both win. One thread serving
# one request at a time makes every request atomic.
#
# Usage: python3 moto_server.py HOST
# Binds HOST on an ephemeral port, prints "PORT <n>" on stdout, then serves
# until SIGTERM/SIGINT or until stdin reaches EOF (the parent test binary
# exited without stopping us).
import os
import signal
import sys
import threading

from werkzeug.serving import make_server

from moto.server import DomainDispatcherApplication, create_backend_app


def main():
    host = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1"
    app = DomainDispatcherApplication(create_backend_app)
    # threaded=False, processes=1: one request at a time, HTTP/1.0 (no
    # keep-alive connection can hold the only thread).
    srv = make_server(host, 0, app, threaded=False)
    port = srv.socket.getsockname()[1]
    # moto builds some URLs (SQS queue URLs) from MOTO_PORT.
    os.environ["MOTO_PORT"] = str(port)

    def stop(*_):
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def watch_stdin():
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except Exception:
            pass
        os._exit(0)

    threading.Thread(target=watch_stdin, daemon=True).start()

    sys.stdout.write("PORT %d\n" % port)
    sys.stdout.flush()
    srv.serve_forever()


if __name__ == "__main__":
    main()
