# Single-threaded moto server for strand's emulator-backed tests.
#
# moto's own `moto_server` serves requests on threads, and its conditional
# writes (S3 If-None-Match, DynamoDB ConditionExpression) are check-then-act
# without a lock, so two concurrent writers can both win. Here every request
# runs moto's application under one global lock, so requests execute one at
# a time and each is atomic. Connections are still accepted and read on
# their own threads: a client's idle keep-alive connection (Go's transport
# keeps a connection it dialed for a request that was then cancelled) must
# not block the server, as it does a single-threaded one.
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
    lock = threading.Lock()

    def serialized(environ, start_response):
        # The whole request, response body included, under the lock.
        with lock:
            return [b"".join(app(environ, start_response))]

    srv = make_server(host, 0, serialized, threaded=True)
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
